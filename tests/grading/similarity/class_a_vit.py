"""Planted class A, 09-vision-transformer: sixteen learners who worked alone, as data.

As in class_a_attention.py: each passes the hidden checks, and they are as varied as a class: patchify by
reshape and permute (the natural form, several of them), by Tensor.unfold, a loop over the grid, split and
stack, einsum; the positions resized by permutes, by unflatten, by transposes, by einsum; the loss by
log_softmax and gather, logsumexp, one-hot products, a loop over the batch. Ada writes the textbook version.
"""

INDEPENDENT = {
    "ada": {  # the textbook version
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return patchify(images, patch) @ weight.reshape(weight.shape[0], -1).T + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    cls = cls_token.expand(patches.shape[0], -1, -1)
    return torch.cat([cls, patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = patch_proj(images).flatten(2).transpose(1, 2)
    x = prepend_cls_add_pos(x, cls_token, pos_embed)
    for blk in blocks:
        x = blk(x)
    return head(norm(x)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    d = grid.shape[-1]
    grid = grid.reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, d)
    return torch.cat([cls, grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    tokens = torch.cat([cls_token.expand(b, -1, -1), dist_token.expand(b, -1, -1), patches], dim=1)
    return tokens + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    teacher = teacher_logits.argmax(dim=-1)
    ce_cls = -F.log_softmax(cls_logits, dim=-1).gather(1, labels[:, None]).mean()
    ce_dist = -F.log_softmax(dist_logits, dim=-1).gather(1, teacher[:, None]).mean()
    return (ce_cls + ce_dist) / 2
''',
    },
    "ben": {  # loops
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    out = []
    for i in range(0, h, patch):
        for j in range(0, w, patch):
            out.append(images[:, :, i:i + patch, j:j + patch].reshape(b, -1))
    return torch.stack(out, dim=1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    tokens = patchify(images, patch)
    kernel = weight.reshape(weight.shape[0], -1)
    return torch.stack([tokens[:, n] @ kernel.T + bias for n in range(tokens.shape[1])], dim=1)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    rows = []
    for i in range(patches.shape[0]):
        rows.append(torch.cat([cls_token[0], patches[i]], dim=0))
    return torch.stack(rows) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    fmap = patch_proj(images)
    B, D, gh, gw = fmap.shape
    tokens = fmap.reshape(B, D, gh * gw).permute(0, 2, 1)
    tokens = torch.cat([cls_token.expand(B, 1, D), tokens], dim=1) + pos_embed
    i = 0
    while i < len(blocks):
        tokens = blocks[i](tokens)
        i += 1
    return head(norm(tokens[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[2]
    grid = pos_embed[0, 1:].T.reshape(d, old_grid[0], old_grid[1]).unsqueeze(0)
    grid = F.interpolate(grid, size=(new_grid[0], new_grid[1]), mode="bicubic", align_corners=False)
    grid = grid.squeeze(0).reshape(d, -1).T.unsqueeze(0)
    return torch.cat([pos_embed[:, :1], grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    B, N, D = patches.shape
    pieces = [cls_token.expand(B, 1, D), dist_token.expand(B, 1, D), patches]
    seq = torch.cat(pieces, dim=1)
    return seq + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    n = cls_logits.shape[0]
    total = 0.0
    for i in range(n):
        t = int(torch.argmax(teacher_logits[i]))
        total = total + torch.logsumexp(cls_logits[i], 0) - cls_logits[i, labels[i]]
        total = total + torch.logsumexp(dist_logits[i], 0) - dist_logits[i, t]
    return total / (2 * n)
''',
    },
    "cara": {  # einsum
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    x = images.reshape(b, c, gh, patch, gw, patch)
    x = torch.einsum("bchpwq->bhwcpq", x)
    return x.reshape(b, gh * gw, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return torch.einsum("bnk,dk->bnd", patchify(images, patch), weight.flatten(1)) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    cls = cls_token.expand(patches.size(0), 1, patches.size(2))
    return torch.cat([cls, patches], 1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    feats = torch.einsum("bdhw->bhwd", patch_proj(images)).flatten(1, 2)
    x = torch.cat([cls_token.expand(feats.shape[0], -1, -1), feats], 1) + pos_embed
    for block in blocks:
        x = block(x)
    return head(norm(x[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    grid = torch.einsum("nd->dn", pos_embed[0, 1:]).reshape(1, d, old_grid[0], old_grid[1])
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = torch.einsum("dn->nd", grid.reshape(d, -1))[None]
    return torch.cat([pos_embed[:, :1], grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    prefix = torch.cat((cls_token, dist_token), dim=1)
    return torch.cat((prefix.expand(patches.shape[0], -1, -1), patches), dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    k = cls_logits.shape[1]
    hot_true = F.one_hot(labels.long(), k).to(cls_logits.dtype)
    hot_teacher = F.one_hot(teacher_logits.argmax(1), k).to(dist_logits.dtype)
    ce_true = -torch.einsum("bk,bk->b", cls_logits.log_softmax(1), hot_true).mean()
    ce_teacher = -torch.einsum("bk,bk->b", dist_logits.log_softmax(1), hot_teacher).mean()
    return 0.5 * ce_true + 0.5 * ce_teacher
''',
    },
    "dev": {  # Tensor.unfold
        "patchify": '''
def patchify(images, patch):
    B, C = images.shape[0], images.shape[1]
    tiles = images.unfold(2, patch, patch).unfold(3, patch, patch)
    tiles = tiles.permute(0, 2, 3, 1, 4, 5)
    return tiles.reshape(B, tiles.shape[1] * tiles.shape[2], C * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    tokens = patchify(images, patch)
    flat = tokens.reshape(-1, tokens.shape[-1])
    out = torch.addmm(bias, flat, weight.reshape(len(weight), -1).t())
    return out.reshape(tokens.shape[0], tokens.shape[1], -1)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    out = torch.cat((cls_token.repeat(len(patches), 1, 1), patches), dim=1)
    return out + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = patch_proj(images)
    x = x.reshape(x.shape[0], x.shape[1], -1).transpose(-1, -2)
    x = prepend_cls_add_pos(x, cls_token, pos_embed)
    for b in blocks:
        x = b(x)
    return head(norm(x[:, 0, :]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls_pos = pos_embed[:, 0:1]
    grid = pos_embed[:, 1:].transpose(1, 2).reshape(1, -1, *old_grid)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat((cls_pos, grid.flatten(2).transpose(1, 2)), dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    extra = torch.cat([cls_token, dist_token], 1).repeat(patches.shape[0], 1, 1)
    return torch.cat([extra, patches], 1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    y_t = teacher_logits.argmax(-1)
    a = torch.logsumexp(cls_logits, -1) - cls_logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    b = torch.logsumexp(dist_logits, -1) - dist_logits.gather(-1, y_t.unsqueeze(-1)).squeeze(-1)
    return 0.5 * (a.mean() + b.mean())
''',
    },
    "eli": {  # transposes and movedim, a buffer filled by slices
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch).transpose(3, 4).movedim(1, 3)
    return x.reshape(b, (h // patch) * (w // patch), c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return F.linear(patchify(images, patch), weight.reshape(weight.size(0), -1), bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    b, n, d = patches.shape
    out = torch.empty(b, n + 1, d, dtype=patches.dtype)
    out[:, 0] = cls_token[0, 0]
    out[:, 1:] = patches
    return out + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    z = patch_proj(images).flatten(start_dim=2).permute(0, 2, 1)
    z = prepend_cls_add_pos(z, cls_token, pos_embed)
    for layer in blocks:
        z = layer(z)
    z = norm(z)
    return head(z[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    h, w = old_grid
    H, W = new_grid
    first, rest = pos_embed[:, :1], pos_embed[:, 1:]
    rest = rest.reshape(1, h, w, -1).movedim(-1, 1)
    rest = F.interpolate(rest, size=(H, W), mode="bicubic", align_corners=False)
    rest = rest.movedim(1, -1).reshape(1, H * W, -1)
    return torch.cat([first, rest], 1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.shape
    out = patches.new_empty(b, n + 2, d)
    out[:, 0] = cls_token[0, 0]
    out[:, 1] = dist_token[0, 0]
    out[:, 2:] = patches
    return out + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def ce(logits, target):
        shifted = logits - logits.max(-1, keepdim=True).values
        logp = shifted - shifted.exp().sum(-1, keepdim=True).log()
        return -logp[torch.arange(len(target)), target].mean()

    return 0.5 * ce(cls_logits, labels) + 0.5 * ce(dist_logits, teacher_logits.argmax(-1))
''',
    },
    "fay": {  # split and stack; nn.Sequential
        "patchify": '''
def patchify(images, patch):
    strips = images.split(patch, dim=2)
    tiles = [tile for strip in strips for tile in strip.split(patch, dim=3)]
    return torch.stack([tile.flatten(1) for tile in tiles], dim=1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    w = weight.flatten(start_dim=1)
    return patchify(images, patch) @ w.t() + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    tok = cls_token.expand(patches.shape[0], 1, -1)
    seq = torch.cat((tok, patches), dim=1)
    return seq + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = patch_proj(images).flatten(2).mT
    x = prepend_cls_add_pos(x, cls_token, pos_embed)
    x = torch.nn.Sequential(*blocks)(x)
    return head(norm(x)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    grid = pos_embed[0, 1:].reshape(*old_grid, d).permute(2, 0, 1).unsqueeze(0)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = grid[0].permute(1, 2, 0).reshape(-1, d).unsqueeze(0)
    return torch.cat([pos_embed[:, :1], grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    special = torch.cat([cls_token, dist_token], dim=1) + pos_embed[:, :2]
    rest = patches + pos_embed[:, 2:]
    return torch.cat([special.expand(patches.shape[0], -1, -1), rest], dim=1)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(cls_logits.shape[0])
    log_p_cls = F.log_softmax(cls_logits, dim=1)
    log_p_dist = F.log_softmax(dist_logits, dim=1)
    loss_cls = -log_p_cls[rows, labels].mean()
    loss_dist = -log_p_dist[rows, teacher_logits.argmax(dim=1)].mean()
    return 0.5 * (loss_cls + loss_dist)
''',
    },
    "gus": {  # flatten twice, unflatten, masked_select
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return x.permute(0, 2, 4, 1, 3, 5).flatten(3).flatten(1, 2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    d = weight.shape[0]
    return torch.matmul(patchify(images, patch), weight.reshape(d, -1).transpose(0, 1)) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([cls_token.repeat(patches.shape[0], 1, 1), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = patch_proj(images).permute(0, 2, 3, 1).flatten(1, 2)
    x = torch.cat([cls_token.expand(len(x), -1, -1), x], 1) + pos_embed
    for block in blocks:
        x = block(x)
    return head(norm(x[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    grid = pos_embed[:, 1:].unflatten(1, tuple(old_grid)).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).flatten(1, 2)
    return torch.cat([pos_embed[:, :1], grid], 1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.shape
    both = torch.cat([cls_token, dist_token], 1).expand(b, 2, d)
    return torch.cat([both, patches], 1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    k = cls_logits.shape[-1]
    pick_true = F.one_hot(labels.long(), k).bool()
    pick_teacher = F.one_hot(teacher_logits.argmax(-1), k).bool()
    l1 = -cls_logits.log_softmax(-1).masked_select(pick_true).mean()
    l2 = -dist_logits.log_softmax(-1).masked_select(pick_teacher).mean()
    return (l1 + l2) * 0.5
''',
    },
    "hana": {  # small helpers defined inside the functions
        "patchify": '''
def patchify(images, patch):
    def grid(n):
        return n // patch

    b, c, h, w = images.shape
    blocks = images.reshape(b, c, grid(h), patch, grid(w), patch)
    blocks = blocks.permute(0, 2, 4, 1, 3, 5).contiguous()
    return blocks.view(b, grid(h) * grid(w), -1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    def as_matrix(w):
        return w.reshape(w.shape[0], -1)

    return torch.matmul(patchify(images, patch), as_matrix(weight).T) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    def batched(t):
        return t.expand(patches.shape[0], -1, -1)

    return torch.cat([batched(cls_token), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    def to_tokens(fmap):
        return fmap.flatten(2).transpose(1, 2)

    h = prepend_cls_add_pos(to_tokens(patch_proj(images)), cls_token, pos_embed)
    for f in blocks:
        h = f(h)
    return head(norm(h)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    def to_image(seq, g):
        return seq.reshape(1, g[0], g[1], -1).permute(0, 3, 1, 2)

    def to_seq(img):
        return img.permute(0, 2, 3, 1).reshape(1, -1, img.shape[1])

    resized = F.interpolate(to_image(pos_embed[:, 1:], old_grid), size=tuple(new_grid), mode="bicubic",
                            align_corners=False)
    return torch.cat([pos_embed[:, :1], to_seq(resized)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    def batched(t):
        return t.expand(patches.shape[0], -1, -1)

    return torch.cat([batched(cls_token), batched(dist_token), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def nll(logits, target):
        return -(logits.log_softmax(dim=-1).gather(-1, target.view(-1, 1))).mean()

    return 0.5 * nll(cls_logits, labels) + 0.5 * nll(dist_logits, teacher_logits.argmax(dim=-1))
''',
    },
    "ivan": {  # a comprehension over the patch grid; the loss from logsumexp and take_along_dim
        "patchify": '''
def patchify(images, patch):
    h, w = images.shape[-2:]
    return torch.stack([images[..., r:r + patch, s:s + patch].flatten(-3)
                        for r in range(0, h, patch) for s in range(0, w, patch)], dim=-2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    flat_w = weight.reshape(weight.shape[0], -1)
    return (patchify(images, patch).unsqueeze(-2) * flat_w).sum(-1) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    cls_pos = cls_token + pos_embed[:, :1]
    return torch.cat([cls_pos.expand(patches.shape[0], -1, -1), patches + pos_embed[:, 1:]], dim=1)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    y = patch_proj(images)
    y = y.reshape(*y.shape[:2], -1).transpose(1, 2)
    y = prepend_cls_add_pos(y, cls_token, pos_embed)
    for block in blocks:
        y = block(y)
    cls_out = norm(y)[:, 0]
    return head(cls_out)
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    gh, gw = old_grid
    dim = pos_embed.shape[-1]
    img = pos_embed[:, 1:].transpose(1, 2).reshape(1, dim, gh, gw)
    img = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([pos_embed[:, :1], img.reshape(1, dim, -1).transpose(1, 2)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    cls_part = (cls_token + pos_embed[:, 0:1]).expand(b, -1, -1)
    dist_part = (dist_token + pos_embed[:, 1:2]).expand(b, -1, -1)
    return torch.cat([cls_part, dist_part, patches + pos_embed[:, 2:]], dim=1)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    t = teacher_logits.argmax(dim=1, keepdim=True)
    y = labels.long().unsqueeze(1)
    ce1 = cls_logits.logsumexp(1) - torch.take_along_dim(cls_logits, y, dim=1).squeeze(1)
    ce2 = dist_logits.logsumexp(1) - torch.take_along_dim(dist_logits, t, dim=1).squeeze(1)
    return (ce1 + ce2).mean() / 2
''',
    },
    "jo": {  # close to the textbook; the loss with an index array
        "patchify": '''
def patchify(images, patch):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // patch, patch, W // patch, patch)
    x = x.permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // patch) * (W // patch), C * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    w = weight.reshape(weight.shape[0], -1)
    return patchify(images, patch) @ w.T + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    B = patches.shape[0]
    return torch.cat([cls_token.expand(B, -1, -1), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    tokens = patch_proj(images).flatten(2).transpose(1, 2)
    tokens = prepend_cls_add_pos(tokens, cls_token, pos_embed)
    for block in blocks:
        tokens = block(tokens)
    tokens = norm(tokens)
    return head(tokens[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls_pos = pos_embed[:, :1]
    patch_pos = pos_embed[:, 1:]
    D = patch_pos.shape[-1]
    patch_pos = patch_pos.reshape(1, old_grid[0], old_grid[1], D).permute(0, 3, 1, 2)
    patch_pos = F.interpolate(patch_pos, size=new_grid, mode="bicubic", align_corners=False)
    patch_pos = patch_pos.permute(0, 2, 3, 1).reshape(1, new_grid[0] * new_grid[1], D)
    return torch.cat([cls_pos, patch_pos], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    B = patches.shape[0]
    prefix = torch.cat([cls_token, dist_token], dim=1).expand(B, -1, -1)
    return torch.cat([prefix, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    idx = torch.arange(labels.shape[0])
    y_teacher = teacher_logits.argmax(dim=-1)
    loss_cls = -torch.log_softmax(cls_logits, dim=-1)[idx, labels].mean()
    loss_dist = -torch.log_softmax(dist_logits, dim=-1)[idx, y_teacher].mean()
    return 0.5 * loss_cls + 0.5 * loss_dist
''',
    },
    "kim": {  # views and transposes, a batched matmul
        "patchify": '''
def patchify(images, patch):
    n, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    x = images.reshape(n, c, gh, patch, gw, patch)
    x = x.transpose(1, 2).transpose(2, 4).transpose(3, 4)
    return x.reshape(n, gh * gw, -1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    w = weight.reshape(weight.shape[0], -1).T.expand(p.shape[0], -1, -1)
    return torch.bmm(p, w) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    cls_tokens = cls_token.expand(patches.shape[0], cls_token.shape[1], cls_token.shape[2])
    x = torch.cat((cls_tokens, patches), dim=1)
    x = x + pos_embed
    return x
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    out = patch_proj(images)
    n, d = out.shape[0], out.shape[1]
    out = out.view(n, d, -1).transpose(1, 2)
    out = prepend_cls_add_pos(out, cls_token, pos_embed)
    for i in range(len(blocks)):
        out = blocks[i](out)
    return head(norm(out[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    n_new = new_grid[0] * new_grid[1]
    d = pos_embed.size(-1)
    grid = pos_embed[:, 1:, :].view(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(new_grid[0], new_grid[1]), mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).contiguous().view(1, n_new, d)
    return torch.cat((pos_embed[:, :1, :], grid), dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    n = patches.shape[0]
    c = cls_token.expand(n, -1, -1)
    t = dist_token.expand(n, -1, -1)
    x = torch.cat((c, t, patches), dim=1)
    x = x + pos_embed
    return x
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    n = cls_logits.size(0)
    logp1 = torch.log_softmax(cls_logits, 1)
    logp2 = torch.log_softmax(dist_logits, 1)
    t = torch.max(teacher_logits, 1)[1]
    l1 = -logp1[range(n), labels].sum() / n
    l2 = -logp2[range(n), t].sum() / n
    return (l1 + l2) / 2
''',
    },
    "lena": {  # one-liners
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    return images.reshape(b, c, h // patch, patch, w // patch, patch).permute(0, 2, 4, 1, 3, 5).reshape(
        b, (h // patch) * (w // patch), -1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return torch.addmm(bias, patchify(images, patch).flatten(0, 1), weight.flatten(1).T).unflatten(
        0, (images.shape[0], -1))
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return pos_embed + torch.cat([cls_token.expand(len(patches), -1, -1), patches], 1)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = prepend_cls_add_pos(patch_proj(images).flatten(2).swapaxes(1, 2), cls_token, pos_embed)
    for blk in blocks:
        x = blk(x)
    return head(norm(x)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    return torch.cat([pos_embed[:, :1], F.interpolate(
        pos_embed[:, 1:].reshape(1, *old_grid, -1).permute(0, 3, 1, 2), size=tuple(new_grid), mode="bicubic",
        align_corners=False).flatten(2).transpose(1, 2)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    return pos_embed + torch.cat([t.expand(len(patches), -1, -1) for t in (cls_token, dist_token)] + [patches], 1)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    return sum(-z.log_softmax(-1).gather(-1, y[:, None]).mean()
               for z, y in ((cls_logits, labels), (dist_logits, teacher_logits.argmax(-1)))) / 2
''',
    },
    "nia": {  # the grid as rows of patches, the loss from index_select
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    rows = images.reshape(b, c, h // patch, patch, w).transpose(1, 2)
    cells = rows.reshape(b, h // patch, c, patch, w // patch, patch).permute(0, 1, 4, 2, 3, 5)
    return cells.reshape(b, -1, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    proj = weight.reshape(weight.shape[0], -1).T
    return patchify(images, patch).matmul(proj).add(bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    b, n, d = patches.shape
    lead = cls_token.reshape(1, 1, d).expand(b, 1, d)
    return torch.cat([lead, patches], dim=1).add(pos_embed)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    seq = patch_proj(images).flatten(2).transpose(1, 2)
    seq = prepend_cls_add_pos(seq, cls_token, pos_embed)
    for module in blocks:
        seq = module(seq)
    first = seq[:, 0]
    return head(norm(first))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    image = pos_embed[0, 1:].view(old_grid[0], old_grid[1], d).permute(2, 0, 1)[None]
    image = F.interpolate(image, size=tuple(new_grid), mode="bicubic", align_corners=False)[0]
    positions = image.permute(1, 2, 0).reshape(-1, d)
    return torch.cat([pos_embed[0, :1], positions])[None]
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.shape
    lead = torch.cat([cls_token.reshape(1, 1, d), dist_token.reshape(1, 1, d)], dim=1).expand(b, 2, d)
    return torch.cat([lead, patches], dim=1).add(pos_embed)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    n, k = cls_logits.shape
    flat = torch.arange(n) * k
    lp_cls = F.log_softmax(cls_logits, dim=1).reshape(-1)
    lp_dist = F.log_softmax(dist_logits, dim=1).reshape(-1)
    picked_cls = lp_cls.index_select(0, flat + labels)
    picked_dist = lp_dist.index_select(0, flat + teacher_logits.argmax(dim=1))
    return -(picked_cls.mean() + picked_dist.mean()) / 2
''',
    },
    "omar": {  # everything through helpers in a cell of his own
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    gh, gw = grid_size(h, w, patch)
    x = images.reshape(b, c, gh, patch, gw, patch)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return linear_map(patchify(images, patch), weight.reshape(weight.shape[0], -1), bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([batch_of(cls_token, patches.shape[0]), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = patch_proj(images)
    x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
    x = torch.cat([batch_of(cls_token, x.shape[0]), x], dim=1) + pos_embed
    for block in blocks:
        x = block(x)
    return head(norm(x[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    img = pos_embed[:, 1:].reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=(new_grid[0], new_grid[1]), mode="bicubic", align_corners=False)
    seq = img.flatten(2).permute(0, 2, 1)
    return torch.cat([pos_embed[:, :1], seq], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    return torch.cat([batch_of(cls_token, b), batch_of(dist_token, b), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    return (cross_entropy(cls_logits, labels) + cross_entropy(dist_logits, teacher_logits.argmax(-1))) / 2
''',
    },
    "pia": {  # a conv-free unfold by strides, the loss with a mask
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.unfold(3, patch, patch)          # (b, c, h, gw, p)
    x = x.unfold(2, patch, patch)               # (b, c, gh, gw, p, p) with the last two axes (col, row)
    x = x.permute(0, 2, 3, 1, 5, 4)
    return x.reshape(b, -1, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    tokens = patchify(images, patch)
    return torch.tensordot(tokens, weight.reshape(weight.shape[0], -1), dims=([2], [1])) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    first = torch.broadcast_to(cls_token, (patches.shape[0], 1, patches.shape[2]))
    return torch.concat([first, patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    maps = patch_proj(images)
    tokens = maps.permute(0, 2, 3, 1).reshape(maps.shape[0], -1, maps.shape[1])
    tokens = prepend_cls_add_pos(tokens, cls_token, pos_embed)
    for blk in blocks:
        tokens = blk(tokens)
    return head(norm(tokens)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    head_pos, body = pos_embed.split([1, pos_embed.shape[1] - 1], dim=1)
    body = body.permute(0, 2, 1).unflatten(2, tuple(old_grid))
    body = F.interpolate(body, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([head_pos, body.flatten(2).permute(0, 2, 1)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    shape = (patches.shape[0], 1, patches.shape[2])
    first = torch.broadcast_to(cls_token, shape)
    second = torch.broadcast_to(dist_token, shape)
    return torch.concat([first, second, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    classes = torch.arange(cls_logits.shape[1])
    true_mask = classes[None, :] == labels[:, None]
    teacher_mask = classes[None, :] == teacher_logits.argmax(1)[:, None]
    ce_a = -(F.log_softmax(cls_logits, 1) * true_mask).sum(1).mean()
    ce_b = -(F.log_softmax(dist_logits, 1) * teacher_mask).sum(1).mean()
    return 0.5 * ce_a + 0.5 * ce_b
''',
    },
    "quinn": {  # float64 through the resize; an explicit stable log-softmax
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    g_h, g_w = h // patch, w // patch
    x = images.view(b, c, g_h, patch, g_w, patch) if images.is_contiguous() else images.reshape(
        b, c, g_h, patch, g_w, patch)
    x = x.permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, g_h * g_w, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    flat = patchify(images, patch)
    kernel = weight.reshape(weight.shape[0], -1)
    return flat @ kernel.transpose(0, 1) + bias.reshape(1, 1, -1)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    cls = cls_token.expand(patches.shape[0], 1, patches.shape[-1])
    tokens = torch.cat([cls, patches], dim=1)
    return tokens + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    feats = patch_proj(images)
    b, d, gh, gw = feats.shape
    feats = feats.flatten(2).transpose(1, 2)
    x = prepend_cls_add_pos(feats, cls_token, pos_embed)
    for block in list(blocks):
        x = block(x)
    return head(norm(x)[:, 0, :])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    gh, gw = old_grid
    nh, nw = new_grid
    d = pos_embed.shape[-1]
    grid = pos_embed[:, 1:].reshape(1, gh, gw, d).permute(0, 3, 1, 2).double()
    grid = F.interpolate(grid, size=(nh, nw), mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, nh * nw, d).to(pos_embed.dtype)
    return torch.cat([pos_embed[:, :1], grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.shape
    cls = cls_token.expand(b, 1, d)
    dist = dist_token.expand(b, 1, d)
    tokens = torch.cat([cls, dist, patches], dim=1)
    return tokens + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def log_softmax(z):
        m = z.max(dim=1, keepdim=True).values
        return z - m - torch.log(torch.exp(z - m).sum(dim=1, keepdim=True))

    n = labels.shape[0]
    teacher = teacher_logits.argmax(dim=1)
    a = log_softmax(cls_logits)[torch.arange(n), labels]
    b = log_softmax(dist_logits)[torch.arange(n), teacher]
    return -(a + b).mean() / 2
''',
    },
}

ADDED = {
    "omar": [("patchify", '''
def grid_size(h, w, patch):
    """How many patches fit along each side."""
    return h // patch, w // patch


def linear_map(x, w, b):
    return x @ w.T + b


def batch_of(token, n):
    """A (1, 1, D) token repeated for a batch of n."""
    return token.expand(n, -1, -1)


def cross_entropy(logits, target):
    logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    return -logp.gather(-1, target.unsqueeze(-1)).mean()
''')],
}

#: the planted copies (as in class_a_attention.py)
COPIES = [
    dict(learner="rosa", source="dev", disguise="renamed", cells={
        "patchify": '''
def patchify(images, patch):
    n_img, n_ch = images.shape[0], images.shape[1]
    blocks = images.unfold(2, patch, patch).unfold(3, patch, patch)
    blocks = blocks.permute(0, 2, 3, 1, 4, 5)
    return blocks.reshape(n_img, blocks.shape[1] * blocks.shape[2], n_ch * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    seq = patchify(images, patch)
    rows = seq.reshape(-1, seq.shape[-1])
    res = torch.addmm(bias, rows, weight.reshape(len(weight), -1).t())
    return res.reshape(seq.shape[0], seq.shape[1], -1)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    joined = torch.cat((cls_token.repeat(len(patches), 1, 1), patches), dim=1)
    return joined + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    h = patch_proj(images)
    h = h.reshape(h.shape[0], h.shape[1], -1).transpose(-1, -2)
    h = prepend_cls_add_pos(h, cls_token, pos_embed)
    for layer in blocks:
        h = layer(h)
    return head(norm(h[:, 0, :]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    lead = pos_embed[:, 0:1]
    field = pos_embed[:, 1:].transpose(1, 2).reshape(1, -1, *old_grid)
    field = F.interpolate(field, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat((lead, field.flatten(2).transpose(1, 2)), dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    front = torch.cat([cls_token, dist_token], 1).repeat(patches.shape[0], 1, 1)
    return torch.cat([front, patches], 1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    target = teacher_logits.argmax(-1)
    first = torch.logsumexp(cls_logits, -1) - cls_logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    second = torch.logsumexp(dist_logits, -1) - dist_logits.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return 0.5 * (first.mean() + second.mean())
''',
    }),
    dict(learner="sam", source="eli", disguise="added cells", cells={
        "patchify": '''
def patchify(images, patch):
    return cut(images, patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return project(images, weight, bias, patch)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return with_cls(patches, cls_token, pos_embed)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    return classify(images, patch_proj, cls_token, pos_embed, blocks, norm, head)
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    return resize(pos_embed, old_grid, new_grid)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    return with_two(patches, cls_token, dist_token, pos_embed)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    return two_heads_loss(cls_logits, dist_logits, teacher_logits, labels)
''',
    }, added=[("patchify", '''
def cut(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch).transpose(3, 4).movedim(1, 3)
    return x.reshape(b, (h // patch) * (w // patch), c * patch * patch)


def project(images, weight, bias, patch):
    return F.linear(patchify(images, patch), weight.reshape(weight.size(0), -1), bias)


def with_cls(patches, cls_token, pos_embed):
    b, n, d = patches.shape
    buf = torch.empty(b, n + 1, d, dtype=patches.dtype)
    buf[:, 0] = cls_token[0, 0]
    buf[:, 1:] = patches
    return buf + pos_embed
'''), ("vit_forward", '''
def classify(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    z = patch_proj(images).flatten(start_dim=2).permute(0, 2, 1)
    z = prepend_cls_add_pos(z, cls_token, pos_embed)
    for layer in blocks:
        z = layer(z)
    z = norm(z)
    return head(z[:, 0])


def resize(pos_embed, old_grid, new_grid):
    h, w = old_grid
    H, W = new_grid
    first, rest = pos_embed[:, :1], pos_embed[:, 1:]
    rest = rest.reshape(1, h, w, -1).movedim(-1, 1)
    rest = F.interpolate(rest, size=(H, W), mode="bicubic", align_corners=False)
    rest = rest.movedim(1, -1).reshape(1, H * W, -1)
    return torch.cat([first, rest], 1)


def with_two(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.shape
    buf = patches.new_empty(b, n + 2, d)
    buf[:, 0] = cls_token[0, 0]
    buf[:, 1] = dist_token[0, 0]
    buf[:, 2:] = patches
    return buf + pos_embed


def two_heads_loss(cls_logits, dist_logits, teacher_logits, labels):
    def ce(logits, target):
        shifted = logits - logits.max(-1, keepdim=True).values
        logp = shifted - shifted.exp().sum(-1, keepdim=True).log()
        return -logp[torch.arange(len(target)), target].mean()

    return 0.5 * ce(cls_logits, labels) + 0.5 * ce(dist_logits, teacher_logits.argmax(-1))
''')]),
    dict(learner="tara", source="quinn", disguise="one exercise copied", exercises=["interpolate_pos_embed"], cells={
        "patchify": '''
def patchify(images, patch):
    batch, chans, height, width = images.shape
    pieces = images.reshape(batch, chans, height // patch, patch, width // patch, patch)
    pieces = pieces.permute(0, 2, 4, 1, 3, 5).flatten(1, 2)
    return pieces.flatten(2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    x = patchify(images, patch)
    return torch.einsum("bpk,ok->bpo", x, weight.reshape(weight.shape[0], -1)) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    start = cls_token.repeat(patches.shape[0], 1, 1)
    return torch.cat([start, patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    grid = patch_proj(images)
    seq = grid.flatten(2).permute(0, 2, 1)
    seq = prepend_cls_add_pos(seq, cls_token, pos_embed)
    for blk in blocks:
        seq = blk(seq)
    return head(norm(seq[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    rows, cols = old_grid
    new_rows, new_cols = new_grid
    width = pos_embed.shape[-1]
    image = pos_embed[:, 1:].reshape(1, rows, cols, width).permute(0, 3, 1, 2).double()
    image = F.interpolate(image, size=(new_rows, new_cols), mode="bicubic", align_corners=False)
    image = image.permute(0, 2, 3, 1).reshape(1, new_rows * new_cols, width).to(pos_embed.dtype)
    return torch.cat([pos_embed[:, :1], image], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    n = patches.shape[0]
    return torch.cat([cls_token.repeat(n, 1, 1), dist_token.repeat(n, 1, 1), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    teacher_choice = teacher_logits.argmax(dim=1)
    part1 = F.log_softmax(cls_logits, dim=1).gather(1, labels.long().view(-1, 1)).squeeze(1)
    part2 = F.log_softmax(dist_logits, dim=1).gather(1, teacher_choice.view(-1, 1)).squeeze(1)
    return -0.5 * part1.mean() - 0.5 * part2.mean()
''',
    }),
    dict(learner="uma", source="kim", disguise="dead code", cells={
        "patchify": '''
def patchify(images, patch):
    n, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    total = gh * gw
    x = images.reshape(n, c, gh, patch, gw, patch)
    y = x.sum()
    x = x.transpose(1, 2).transpose(2, 4).transpose(3, 4)
    shape_check = x.shape
    return x.reshape(n, gh * gw, -1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    d = weight.shape[0]
    w = weight.reshape(weight.shape[0], -1).T.expand(p.shape[0], -1, -1)
    tmp = w.shape
    return torch.bmm(p, w) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    cls_tokens = cls_token.expand(patches.shape[0], cls_token.shape[1], cls_token.shape[2])
    n = patches.shape[1]
    x = torch.cat((cls_tokens, patches), dim=1)
    old = x
    x = x + pos_embed
    return x
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    out = patch_proj(images)
    n, d = out.shape[0], out.shape[1]
    spatial = out.shape[2:]
    out = out.view(n, d, -1).transpose(1, 2)
    out = prepend_cls_add_pos(out, cls_token, pos_embed)
    count = 0
    for i in range(len(blocks)):
        out = blocks[i](out)
        count += 1
    return head(norm(out[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    n_old = old_grid[0] * old_grid[1]
    n_new = new_grid[0] * new_grid[1]
    d = pos_embed.size(-1)
    grid = pos_embed[:, 1:, :].view(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    before = grid.clone()
    grid = F.interpolate(grid, size=(new_grid[0], new_grid[1]), mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).contiguous().view(1, n_new, d)
    if n_new < 0:
        grid = grid * 0
    return torch.cat((pos_embed[:, :1, :], grid), dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    n = patches.shape[0]
    c = cls_token.expand(n, -1, -1)
    t = dist_token.expand(n, -1, -1)
    both = c.shape[1] + t.shape[1]
    x = torch.cat((c, t, patches), dim=1)
    x = x + pos_embed
    return x
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    n = cls_logits.size(0)
    k = cls_logits.size(1)
    logp1 = torch.log_softmax(cls_logits, 1)
    logp2 = torch.log_softmax(dist_logits, 1)
    p1 = logp1.exp()
    t = torch.max(teacher_logits, 1)[1]
    l1 = -logp1[range(n), labels].sum() / n
    l2 = -logp2[range(n), t].sum() / n
    avg = (l1 + l2) / 2
    return (l1 + l2) / 2
''',
    }),
    dict(learner="vic", source="omar", disguise="helpers inlined", cells={
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    x = images.reshape(b, c, gh, patch, gw, patch)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return patchify(images, patch) @ weight.reshape(weight.shape[0], -1).T + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([cls_token.expand(patches.shape[0], -1, -1), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = patch_proj(images)
    x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
    x = torch.cat([cls_token.expand(x.shape[0], -1, -1), x], dim=1) + pos_embed
    for block in blocks:
        x = block(x)
    return head(norm(x[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    img = pos_embed[:, 1:].reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=(new_grid[0], new_grid[1]), mode="bicubic", align_corners=False)
    seq = img.flatten(2).permute(0, 2, 1)
    return torch.cat([pos_embed[:, :1], seq], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    return torch.cat([cls_token.expand(b, -1, -1), dist_token.expand(b, -1, -1), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    lp_cls = cls_logits - torch.logsumexp(cls_logits, dim=-1, keepdim=True)
    lp_dist = dist_logits - torch.logsumexp(dist_logits, dim=-1, keepdim=True)
    ce_cls = -lp_cls.gather(-1, labels.unsqueeze(-1)).mean()
    ce_dist = -lp_dist.gather(-1, teacher_logits.argmax(-1).unsqueeze(-1)).mean()
    return (ce_cls + ce_dist) / 2
''',
    }),
    dict(learner="wes", source="jo", disguise="helpers extracted", cells={
        "patchify": '''
def grid_of(images, patch):
    B, C, H, W = images.shape
    return B, C, H // patch, W // patch


def patchify(images, patch):
    B, C, gh, gw = grid_of(images, patch)
    x = images.reshape(B, C, gh, patch, gw, patch)
    x = x.permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, gh * gw, C * patch * patch)
''',
        "patch_embed": '''
def flat_kernel(weight):
    return weight.reshape(weight.shape[0], -1)


def patch_embed(images, weight, bias, patch):
    return patchify(images, patch) @ flat_kernel(weight).T + bias
''',
        "prepend_cls_add_pos": '''
def tile(token, B):
    return token.expand(B, -1, -1)


def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([tile(cls_token, patches.shape[0]), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def run_blocks(tokens, blocks):
    for block in blocks:
        tokens = block(tokens)
    return tokens


def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    tokens = patch_proj(images).flatten(2).transpose(1, 2)
    tokens = run_blocks(prepend_cls_add_pos(tokens, cls_token, pos_embed), blocks)
    tokens = norm(tokens)
    return head(tokens[:, 0])
''',
        "interpolate_pos_embed": '''
def to_map(patch_pos, grid, D):
    return patch_pos.reshape(1, grid[0], grid[1], D).permute(0, 3, 1, 2)


def to_sequence(patch_pos, grid, D):
    return patch_pos.permute(0, 2, 3, 1).reshape(1, grid[0] * grid[1], D)


def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls_pos = pos_embed[:, :1]
    patch_pos = pos_embed[:, 1:]
    D = patch_pos.shape[-1]
    patch_pos = F.interpolate(to_map(patch_pos, old_grid, D), size=new_grid, mode="bicubic", align_corners=False)
    return torch.cat([cls_pos, to_sequence(patch_pos, new_grid, D)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    prefix = tile(torch.cat([cls_token, dist_token], dim=1), patches.shape[0])
    return torch.cat([prefix, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def head_loss(logits, target):
    idx = torch.arange(target.shape[0])
    return -torch.log_softmax(logits, dim=-1)[idx, target].mean()


def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    y_teacher = teacher_logits.argmax(dim=-1)
    return 0.5 * head_loss(cls_logits, labels) + 0.5 * head_loss(dist_logits, y_teacher)
''',
    }),
    dict(learner="xia", source="ben", disguise="loop style changed", cells={
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    out = [images[:, :, i:i + patch, j:j + patch].reshape(b, -1)
           for i in range(0, h, patch) for j in range(0, w, patch)]
    return torch.stack(out, dim=1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    tokens = patchify(images, patch)
    kernel = weight.reshape(weight.shape[0], -1)
    outs = []
    for n in range(tokens.shape[1]):
        outs.append(tokens[:, n] @ kernel.T + bias)
    return torch.stack(outs, dim=1)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    rows = [torch.cat([cls_token[0], p], dim=0) for p in patches]
    return torch.stack(rows) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    fmap = patch_proj(images)
    B, D, gh, gw = fmap.shape
    tokens = fmap.reshape(B, D, gh * gw).permute(0, 2, 1)
    tokens = torch.cat([cls_token.expand(B, 1, D), tokens], dim=1) + pos_embed
    for i in range(len(blocks)):
        tokens = blocks[i](tokens)
    return head(norm(tokens[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[2]
    grid = pos_embed[0, 1:].T.reshape(d, old_grid[0], old_grid[1]).unsqueeze(0)
    grid = F.interpolate(grid, size=(new_grid[0], new_grid[1]), mode="bicubic", align_corners=False)
    grid = grid.squeeze(0).reshape(d, -1).T.unsqueeze(0)
    return torch.cat([pos_embed[:, :1], grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    B, N, D = patches.shape
    seq = torch.cat([cls_token.expand(B, 1, D), dist_token.expand(B, 1, D), patches], dim=1)
    return seq + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    n = cls_logits.shape[0]
    total = 0.0
    i = 0
    while i < n:
        t = int(torch.argmax(teacher_logits[i]))
        total = total + torch.logsumexp(cls_logits[i], 0) - cls_logits[i, labels[i]]
        total = total + torch.logsumexp(dist_logits[i], 0) - dist_logits[i, t]
        i += 1
    return total / (2 * n)
''',
    }),
    dict(learner="yan", source="gus", disguise="calls respelled", cells={
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.size()
    x = torch.reshape(images, (b, c, h // patch, patch, w // patch, patch))
    return torch.flatten(torch.flatten(torch.permute(x, (0, 2, 4, 1, 3, 5)), start_dim=3), 1, 2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    d = weight.size(0)
    return patchify(images, patch).matmul(torch.transpose(torch.reshape(weight, (d, -1)), 0, 1)) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.add(torch.cat((cls_token.repeat(patches.size(0), 1, 1), patches), 1), pos_embed)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = torch.flatten(torch.permute(patch_proj(images), (0, 2, 3, 1)), 1, 2)
    x = torch.cat((cls_token.expand(x.size(0), -1, -1), x), dim=1) + pos_embed
    for block in blocks:
        x = block(x)
    return head(norm(x[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    grid = torch.permute(torch.unflatten(pos_embed[:, 1:], 1, tuple(old_grid)), (0, 3, 1, 2))
    grid = F.interpolate(grid, tuple(new_grid), None, "bicubic", False)
    grid = torch.flatten(grid.permute(0, 2, 3, 1), start_dim=1, end_dim=2)
    return torch.cat((pos_embed[:, :1], grid), dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.size()
    both = torch.cat((cls_token, dist_token), dim=1).expand(b, 2, d)
    return torch.add(torch.cat((both, patches), dim=1), pos_embed)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    k = cls_logits.size(-1)
    pick_true = F.one_hot(labels.long(), num_classes=k).bool()
    pick_teacher = F.one_hot(torch.argmax(teacher_logits, dim=-1), num_classes=k).bool()
    l1 = -torch.masked_select(F.log_softmax(cls_logits, dim=-1), pick_true).mean()
    l2 = -torch.masked_select(F.log_softmax(dist_logits, dim=-1), pick_teacher).mean()
    return torch.mul(torch.add(l1, l2), 0.5)
''',
    }),
    dict(learner="zed", source="ada", disguise="builtin-named locals renamed (cls)", cells={
        "patchify": '''
def patchify(images, patch):
    n, ch, ht, wd = images.shape
    y = images.reshape(n, ch, ht // patch, patch, wd // patch, patch).permute(0, 2, 4, 1, 3, 5)
    return y.reshape(n, -1, ch * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return patchify(images, patch) @ weight.reshape(weight.shape[0], -1).T + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    first = cls_token.expand(patches.shape[0], -1, -1)
    return torch.cat([first, patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = patch_proj(images).flatten(2).transpose(1, 2)
    t = prepend_cls_add_pos(t, cls_token, pos_embed)
    for layer in blocks:
        t = layer(t)
    return head(norm(t)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    first, rest = pos_embed[:, :1], pos_embed[:, 1:]
    width = rest.shape[-1]
    rest = rest.reshape(1, old_grid[0], old_grid[1], width).permute(0, 3, 1, 2)
    rest = F.interpolate(rest, size=tuple(new_grid), mode="bicubic", align_corners=False)
    rest = rest.permute(0, 2, 3, 1).reshape(1, -1, width)
    return torch.cat([first, rest], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    n = patches.shape[0]
    seq = torch.cat([cls_token.expand(n, -1, -1), dist_token.expand(n, -1, -1), patches], dim=1)
    return seq + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    picked = teacher_logits.argmax(dim=-1)
    a = -F.log_softmax(cls_logits, dim=-1).gather(1, labels[:, None]).mean()
    b = -F.log_softmax(dist_logits, dim=-1).gather(1, picked[:, None]).mean()
    return (a + b) / 2
''',
    }),
    dict(learner="ari", source="cara", disguise="reordered", cells={
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    gw, gh = w // patch, h // patch
    x = torch.einsum("bchpwq->bhwcpq", images.reshape(b, c, gh, patch, gw, patch))
    return x.reshape(b, gh * gw, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return torch.einsum("bnk,dk->bnd", patchify(images, patch), weight.flatten(1)) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    lead = cls_token.expand(patches.size(0), 1, patches.size(2))
    return torch.cat([lead, patches], 1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    feats = torch.einsum("bdhw->bhwd", patch_proj(images)).flatten(1, 2)
    x = torch.cat([cls_token.expand(feats.shape[0], -1, -1), feats], 1) + pos_embed
    for block in blocks:
        x = block(x)
    return head(norm(x[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    first = pos_embed[:, :1]
    g = torch.einsum("nd->dn", pos_embed[0, 1:]).reshape(1, d, old_grid[0], old_grid[1])
    g = torch.einsum("dn->nd", F.interpolate(g, size=tuple(new_grid), mode="bicubic",
                                             align_corners=False).reshape(d, -1))[None]
    return torch.cat([first, g], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    front = torch.cat((cls_token, dist_token), dim=1)
    return torch.cat((front.expand(patches.shape[0], -1, -1), patches), dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    k = cls_logits.shape[1]
    hot_teacher = F.one_hot(teacher_logits.argmax(1), k).to(dist_logits.dtype)
    ce_teacher = -torch.einsum("bk,bk->b", dist_logits.log_softmax(1), hot_teacher).mean()
    hot_true = F.one_hot(labels.long(), k).to(cls_logits.dtype)
    ce_true = -torch.einsum("bk,bk->b", cls_logits.log_softmax(1), hot_true).mean()
    return 0.5 * ce_teacher + 0.5 * ce_true
''',
    }),
    dict(learner="bo", source="nia", disguise="several at once (renamed, respelled, reordered, dead code)", cells={
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.size()
    strips = torch.transpose(images.reshape(b, c, h // patch, patch, w), 1, 2)
    n_strips = strips.size(1)
    tiles = torch.permute(strips.reshape(b, h // patch, c, patch, w // patch, patch), (0, 1, 4, 2, 3, 5))
    return torch.reshape(tiles, (b, -1, c * patch * patch))
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    mat = torch.reshape(weight, (weight.size(0), -1)).T
    out = torch.matmul(patchify(images, patch), mat)
    return torch.add(out, bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    d = patches.size(2)
    b = patches.size(0)
    first = cls_token.reshape(1, 1, d).expand(b, 1, d)
    return torch.add(torch.cat((first, patches), 1), pos_embed)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    s = torch.transpose(torch.flatten(patch_proj(images), 2), 1, 2)
    s = prepend_cls_add_pos(s, cls_token, pos_embed)
    n_blocks = len(blocks)
    for m in blocks:
        s = m(s)
    return head(norm(s[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    width = pos_embed.size(-1)
    pic = torch.permute(pos_embed[0, 1:].view(old_grid[0], old_grid[1], width), (2, 0, 1))[None]
    pic = F.interpolate(pic, tuple(new_grid), mode="bicubic", align_corners=False)[0]
    check = pic.shape
    seq = torch.reshape(torch.permute(pic, (1, 2, 0)), (-1, width))
    return torch.cat((pos_embed[0, :1], seq))[None]
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.size()
    pair = torch.cat((cls_token.reshape(1, 1, d), dist_token.reshape(1, 1, d)), dim=1)
    return torch.add(torch.cat((pair.expand(b, 2, d), patches), dim=1), pos_embed)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows, classes = cls_logits.size()
    base = torch.arange(rows) * classes
    b = F.log_softmax(dist_logits, 1).reshape(-1).index_select(0, base + torch.argmax(teacher_logits, 1))
    a = F.log_softmax(cls_logits, 1).reshape(-1).index_select(0, base + labels)
    return -(a.mean() + b.mean()) / 2
''',
    }),
    dict(learner="cy", source="pia", disguise="several at once (extracted helpers, respelled, dead code)", cells={
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.size()
    x = torch.permute(images.unfold(3, patch, patch).unfold(2, patch, patch), (0, 2, 3, 1, 5, 4))
    junk = x.numel()
    return torch.reshape(x, (b, -1, c * patch * patch))
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    tokens = patchify(images, patch)
    flat = weight.reshape(weight.size(0), -1)
    return torch.tensordot(tokens, flat, dims=([2], [1])) + bias
''',
        "prepend_cls_add_pos": '''
def spread(token, like):
    return torch.broadcast_to(token, (like.size(0), 1, like.size(2)))


def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([spread(cls_token, patches), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    maps = patch_proj(images)
    seq = torch.reshape(torch.permute(maps, (0, 2, 3, 1)), (maps.size(0), -1, maps.size(1)))
    seq = prepend_cls_add_pos(seq, cls_token, pos_embed)
    for blk in blocks:
        seq = blk(seq)
    return head(norm(seq)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    front, body = torch.split(pos_embed, [1, pos_embed.size(1) - 1], dim=1)
    body = torch.unflatten(torch.permute(body, (0, 2, 1)), 2, tuple(old_grid))
    body = F.interpolate(body, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([front, torch.permute(torch.flatten(body, 2), (0, 2, 1))], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    return torch.cat([spread(cls_token, patches), spread(dist_token, patches), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def one_side(logits, target):
    classes = torch.arange(logits.size(1))
    hit = classes[None, :] == target[:, None]
    return -(F.log_softmax(logits, 1) * hit).sum(1).mean()


def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    unused = cls_logits.size()
    return 0.5 * one_side(cls_logits, labels) + 0.5 * one_side(dist_logits, torch.argmax(teacher_logits, 1))
''',
    }),
    dict(learner="dee", source="(reference)", disguise="the reference pasted, names changed", cells={
        "patchify": '''
def patchify(images, patch):
    n, ch, ht, wd = images.shape
    if ht % patch or wd % patch:
        raise ValueError(f"image size {ht}x{wd} is not divisible by patch size {patch}")
    y = images.reshape(n, ch, ht // patch, patch, wd // patch, patch)
    y = y.permute(0, 2, 4, 1, 3, 5)
    return y.reshape(n, (ht // patch) * (wd // patch), ch * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    tiles = patchify(images, patch)
    return tiles @ weight.reshape(weight.shape[0], -1).T + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    first = cls_token.expand(patches.shape[0], -1, -1)
    return torch.cat([first, patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    seq = patch_proj(images).flatten(2).transpose(1, 2)
    seq = prepend_cls_add_pos(seq, cls_token, pos_embed)
    for layer in blocks:
        seq = layer(seq)
    return head(norm(seq)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    lead, body = pos_embed[:, :1], pos_embed[:, 1:]
    width = body.shape[-1]
    pic = body.reshape(1, old_grid[0], old_grid[1], width).permute(0, 3, 1, 2)
    pic = F.interpolate(pic, size=tuple(new_grid), mode="bicubic", align_corners=False)
    body = pic.permute(0, 2, 3, 1).reshape(1, new_grid[0] * new_grid[1], width)
    return torch.cat([lead, body], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    n = patches.shape[0]
    front = torch.cat([cls_token, dist_token], dim=1).expand(n, -1, -1)
    return torch.cat([front, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    r = torch.arange(labels.shape[0])
    t = teacher_logits.argmax(dim=-1)
    a = -torch.log_softmax(cls_logits, dim=-1)[r, labels].mean()
    b = -torch.log_softmax(dist_logits, dim=-1)[r, t].mean()
    return (a + b) / 2
''',
    }),
    dict(learner="eve", source="hana", disguise="helpers inlined, renamed", cells={
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    cut = images.reshape(b, c, h // patch, patch, w // patch, patch)
    cut = cut.permute(0, 2, 4, 1, 3, 5).contiguous()
    return cut.view(b, (h // patch) * (w // patch), -1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return torch.matmul(patchify(images, patch), weight.reshape(weight.shape[0], -1).T) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([cls_token.expand(patches.shape[0], -1, -1), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    state = prepend_cls_add_pos(patch_proj(images).flatten(2).transpose(1, 2), cls_token, pos_embed)
    for g in blocks:
        state = g(state)
    return head(norm(state)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    picture = pos_embed[:, 1:].reshape(1, old_grid[0], old_grid[1], -1).permute(0, 3, 1, 2)
    resized = F.interpolate(picture, size=tuple(new_grid), mode="bicubic", align_corners=False)
    back = resized.permute(0, 2, 3, 1).reshape(1, -1, resized.shape[1])
    return torch.cat([pos_embed[:, :1], back], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    n = patches.shape[0]
    return torch.cat([cls_token.expand(n, -1, -1), dist_token.expand(n, -1, -1), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    first = -(cls_logits.log_softmax(dim=-1).gather(-1, labels.view(-1, 1))).mean()
    second = -(dist_logits.log_softmax(dim=-1).gather(-1, teacher_logits.argmax(dim=-1).view(-1, 1))).mean()
    return 0.5 * first + 0.5 * second
''',
    }),
]
