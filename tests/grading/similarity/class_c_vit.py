"""Planted class C (held out), 09-vision-transformer: fourteen learners who worked alone, written after the
report was tuned, as data.

As class_c_attention.py: each learner's code in a style of its own (Tensor.unfold, split and stack, a loop over
the grid, tensordot, F.linear, an empty buffer filled by slices, functools.reduce over the blocks, one-hot
targets, logsumexp, the two heads stacked into one batch, ...). Every one of them passes the hidden checks
(``python -m tests.grading.similarity.planted check c``).
"""

INDEPENDENT = {
    "arlo": {  # reshape and permute, close to the book
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
    return torch.cat([cls_token.expand(patches.shape[0], -1, -1), patches], dim=1) + pos_embed
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
    d = pos_embed.shape[-1]
    grid = pos_embed[:, 1:].reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, d)
    return torch.cat([pos_embed[:, :1], grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    return torch.cat([cls_token.expand(b, -1, -1), dist_token.expand(b, -1, -1), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    teacher = teacher_logits.argmax(dim=-1)
    lc = F.log_softmax(cls_logits, dim=-1).gather(1, labels.long().unsqueeze(1)).mean()
    ld = F.log_softmax(dist_logits, dim=-1).gather(1, teacher.unsqueeze(1)).mean()
    return -(lc + ld) / 2
''',
    },
    "bea": {  # Tensor.unfold twice; F.linear
        "patchify": '''
def patchify(images, patch):
    tiles = images.unfold(2, patch, patch).unfold(3, patch, patch)
    b, c, gh, gw = tiles.shape[:4]
    return tiles.permute(0, 2, 3, 1, 4, 5).reshape(b, gh * gw, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return F.linear(patchify(images, patch), weight.flatten(1), bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    cls = cls_token.repeat(patches.size(0), 1, 1)
    return torch.cat((cls, patches), dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    feat = patch_proj(images)
    b, d = feat.shape[:2]
    tokens = feat.permute(0, 2, 3, 1).reshape(b, -1, d)
    tokens = prepend_cls_add_pos(tokens, cls_token, pos_embed)
    for layer in blocks:
        tokens = layer(tokens)
    return head(norm(tokens[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls_part = pos_embed[:, :1, :]
    grid_part = pos_embed[:, 1:, :]
    gh, gw = old_grid
    img = grid_part.transpose(1, 2).reshape(1, -1, gh, gw)
    img = F.interpolate(img, size=(new_grid[0], new_grid[1]), mode="bicubic", align_corners=False)
    return torch.cat((cls_part, img.flatten(2).transpose(1, 2)), dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    n = patches.size(0)
    extra = torch.cat((cls_token, dist_token), dim=1).repeat(n, 1, 1)
    return torch.cat((extra, patches), dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def ce(logits, target):
        picked = logits.gather(-1, target.long().unsqueeze(-1)).squeeze(-1)
        return (torch.logsumexp(logits, dim=-1) - picked).mean()
    return 0.5 * ce(cls_logits, labels) + 0.5 * ce(dist_logits, teacher_logits.argmax(-1))
''',
    },
    "cato": {  # loops over the grid; a broadcast product for the projection
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    out = []
    for top in range(0, h, patch):
        for left in range(0, w, patch):
            block = images[:, :, top:top + patch, left:left + patch]
            out.append(block.reshape(b, c * patch * patch))
    return torch.stack(out, dim=1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    w = weight.reshape(weight.shape[0], -1)
    return (p.unsqueeze(2) * w).sum(-1) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    b, n, d = patches.shape
    out = torch.empty(b, n + 1, d, dtype=patches.dtype)
    out[:, :1] = cls_token
    out[:, 1:] = patches
    return out + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    f = patch_proj(images)
    seq = f.reshape(f.shape[0], f.shape[1], -1).permute(0, 2, 1)
    seq = prepend_cls_add_pos(seq, cls_token, pos_embed)
    i = 0
    while i < len(blocks):
        seq = blocks[i](seq)
        i += 1
    return head(norm(seq)[:, 0, :])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    dim = pos_embed.shape[2]
    cls, rest = pos_embed.split([1, pos_embed.shape[1] - 1], dim=1)
    img = rest.view(1, old_grid[0], old_grid[1], dim).movedim(-1, 1)
    img = F.interpolate(img, size=list(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([cls, img.movedim(1, -1).reshape(1, new_grid[0] * new_grid[1], dim)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.shape
    out = torch.empty(b, n + 2, d, dtype=patches.dtype)
    out[:, 0:1] = cls_token
    out[:, 1:2] = dist_token
    out[:, 2:] = patches
    return out + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    total = 0.0
    for logits, target in ((cls_logits, labels), (dist_logits, teacher_logits.argmax(dim=1))):
        logp = logits - logits.logsumexp(dim=1, keepdim=True)
        total = total - logp[torch.arange(logits.shape[0]), target.long()].mean()
    return total / 2
''',
    },
    "dina": {  # split and stack; tensordot
        "patchify": '''
def patchify(images, patch):
    rows = images.split(patch, dim=2)
    tiles = [t for row in rows for t in row.split(patch, dim=3)]
    return torch.stack(tiles, dim=1).flatten(2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return torch.tensordot(patchify(images, patch), weight.flatten(1), dims=([2], [1])) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    head = cls_token + pos_embed[:, :1]
    body = patches + pos_embed[:, 1:]
    return torch.cat([head.expand(patches.shape[0], -1, -1), body], dim=1)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    z = patch_proj(images)
    z = z.flatten(start_dim=2).transpose(-1, -2)
    z = prepend_cls_add_pos(z, cls_token, pos_embed)
    z = functools.reduce(lambda acc, blk: blk(acc), blocks, z)
    return head(norm(z)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    grid = pos_embed[0, 1:].T.reshape(1, -1, *old_grid)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = grid.reshape(grid.shape[1], -1).T.unsqueeze(0)
    return torch.cat([pos_embed[:, :1], grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    front = torch.cat([cls_token, dist_token], dim=1) + pos_embed[:, :2]
    return torch.cat([front.expand(b, -1, -1), patches + pos_embed[:, 2:]], dim=1)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    k = cls_logits.shape[-1]
    y = F.one_hot(labels.long(), k).to(cls_logits.dtype)
    y_t = F.one_hot(teacher_logits.argmax(-1), k).to(dist_logits.dtype)
    loss_cls = -(y * F.log_softmax(cls_logits, -1)).sum(-1).mean()
    loss_dist = -(y_t * F.log_softmax(dist_logits, -1)).sum(-1).mean()
    return 0.5 * (loss_cls + loss_dist)
''',
    },
    "ezra": {  # views and transposes one axis at a time; einsum
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    x = images.reshape(b, c, gh, patch, gw, patch)
    x = x.transpose(3, 4)
    x = x.transpose(1, 2).transpose(2, 3)
    return x.reshape(b, gh * gw, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return torch.einsum("bnk,dk->bnd", patchify(images, patch), weight.reshape(weight.shape[0], -1)) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    tokens = torch.cat([cls_token.expand(len(patches), 1, cls_token.shape[-1]), patches], dim=1)
    return tokens + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    h = patch_proj(images)
    h = torch.einsum("bdij->bijd", h).flatten(1, 2)
    h = prepend_cls_add_pos(h, cls_token, pos_embed)
    for b in blocks:
        h = b(h)
    cls = norm(h)[:, 0]
    return head(cls)
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    first = pos_embed[:, 0:1]
    d = pos_embed.size(-1)
    g = pos_embed[:, 1:].reshape(1, old_grid[0], old_grid[1], d)
    g = torch.einsum("bhwd->bdhw", g)
    g = F.interpolate(g, size=tuple(new_grid), mode="bicubic", align_corners=False)
    g = torch.einsum("bdhw->bhwd", g).reshape(1, -1, d)
    return torch.cat([first, g], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, _, d = patches.shape
    return torch.cat([cls_token.expand(b, 1, d), dist_token.expand(b, 1, d), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(len(labels))
    a = -cls_logits.log_softmax(-1)[rows, labels.long()].mean()
    b = -dist_logits.log_softmax(-1)[rows, teacher_logits.argmax(-1)].mean()
    return (a + b) * 0.5
''',
    },
    "fern": {  # float64 through the resize; the two heads stacked into one batch
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    grid = images.contiguous().view(b, c, h // patch, patch, w // patch, patch)
    grid = grid.permute(0, 2, 4, 1, 3, 5).contiguous()
    return grid.view(b, (h // patch) * (w // patch), -1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    flat = weight.reshape(weight.size(0), -1)
    return torch.matmul(patchify(images, patch), flat.t()) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    batch = patches.shape[0]
    cls = cls_token.expand(batch, -1, -1)
    seq = torch.cat([cls, patches], dim=1)
    return seq + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = patch_proj(images).flatten(2).transpose(1, 2)
    t = prepend_cls_add_pos(t, cls_token, pos_embed)
    t = torch.nn.Sequential(*blocks)(t)
    return head(norm(t)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    dtype = pos_embed.dtype
    d = pos_embed.shape[-1]
    grid = pos_embed[:, 1:].double().reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False).to(dtype)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, d)
    return torch.cat([pos_embed[:, :1], grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    batch = patches.shape[0]
    cls = cls_token.expand(batch, -1, -1)
    dist = dist_token.expand(batch, -1, -1)
    seq = torch.cat([cls, dist, patches], dim=1)
    return seq + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    logits = torch.cat([cls_logits, dist_logits], dim=0)
    targets = torch.cat([labels.long(), teacher_logits.argmax(dim=-1)])
    logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    return -logp.gather(1, targets[:, None]).mean()
''',
    },
    "gil": {  # flatten and unflatten; take_along_dim
        "patchify": '''
def patchify(images, patch):
    x = images.unflatten(2, (-1, patch)).unflatten(4, (-1, patch))
    x = x.permute(0, 2, 4, 1, 3, 5)
    return x.flatten(3).flatten(1, 2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return patchify(images, patch).matmul(weight.flatten(1).transpose(0, 1)).add(bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([cls_token.expand(patches.size(0), 1, -1), patches], 1).add(pos_embed)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    out = patch_proj(images)
    out = out.flatten(2).permute(0, 2, 1)
    out = prepend_cls_add_pos(out, cls_token, pos_embed)
    for blk in blocks:
        out = blk(out)
    return head(norm(out[:, :1]).squeeze(1))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls = pos_embed[:, :1]
    grid = pos_embed[:, 1:].unflatten(1, tuple(old_grid)).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([cls, grid.flatten(2).transpose(1, 2)], 1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.size(0)
    return torch.cat([cls_token.expand(b, 1, -1), dist_token.expand(b, 1, -1), patches], 1).add(pos_embed)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    t = teacher_logits.argmax(dim=-1, keepdim=True)
    y = labels.long().unsqueeze(-1)
    nll_c = -torch.take_along_dim(torch.log_softmax(cls_logits, -1), y, dim=-1)
    nll_d = -torch.take_along_dim(torch.log_softmax(dist_logits, -1), t, dim=-1)
    return (nll_c.mean() + nll_d.mean()) / 2
''',
    },
    "hedy": {  # nested helpers
        "patchify": '''
def patchify(images, patch):
    def grid(n):
        return n // patch

    b, c, h, w = images.shape
    x = images.reshape(b, c, grid(h), patch, grid(w), patch)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, grid(h) * grid(w), -1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    def as_rows(w):
        return w.reshape(len(w), -1)

    return torch.matmul(patchify(images, patch), as_rows(weight).T) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    def tile(tok):
        return tok.expand(patches.shape[0], -1, -1)

    return torch.cat([tile(cls_token), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    def to_tokens(f):
        return f.flatten(2).transpose(1, 2)

    x = prepend_cls_add_pos(to_tokens(patch_proj(images)), cls_token, pos_embed)
    for block in blocks:
        x = block(x)
    return head(norm(x)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    def to_image(tokens, hw):
        return tokens.reshape(1, hw[0], hw[1], -1).permute(0, 3, 1, 2)

    def to_tokens(img):
        return img.permute(0, 2, 3, 1).reshape(1, -1, img.shape[1])

    img = F.interpolate(to_image(pos_embed[:, 1:], old_grid), size=tuple(new_grid), mode="bicubic",
                        align_corners=False)
    return torch.cat([pos_embed[:, :1], to_tokens(img)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    def tile(tok):
        return tok.expand(patches.shape[0], -1, -1)

    return torch.cat([tile(cls_token), tile(dist_token), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def nll(logits, target):
        return -F.log_softmax(logits, dim=-1).gather(-1, target.long().view(-1, 1)).mean()

    return (nll(cls_logits, labels) + nll(dist_logits, teacher_logits.argmax(-1))) / 2
''',
    },
    "ines": {  # a comprehension over the grid; masked sums for the loss
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    tiles = [images[:, :, i * patch:(i + 1) * patch, j * patch:(j + 1) * patch].flatten(1)
             for i in range(h // patch) for j in range(w // patch)]
    return torch.stack(tiles, dim=1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    tokens = patchify(images, patch)
    return tokens @ weight.flatten(start_dim=1).mT + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    batch = patches.shape[0]
    return torch.cat([cls_token.expand(batch, -1, -1), patches], dim=-2) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    grid = patch_proj(images)
    b, d, gh, gw = grid.shape
    seq = grid.reshape(b, d, gh * gw).transpose(1, 2)
    seq = prepend_cls_add_pos(seq, cls_token, pos_embed)
    for f in blocks:
        seq = f(seq)
    seq = norm(seq)
    return head(seq[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    h0, w0 = old_grid
    h1, w1 = new_grid
    grid = pos_embed[:, 1:].transpose(1, 2).reshape(1, d, h0, w0)
    grid = F.interpolate(grid, size=(h1, w1), mode="bicubic", align_corners=False)
    return torch.cat([pos_embed[:, :1], grid.reshape(1, d, h1 * w1).transpose(1, 2)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    batch = patches.shape[0]
    pair = torch.cat([cls_token, dist_token], dim=-2).expand(batch, -1, -1)
    return torch.cat([pair, patches], dim=-2) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    k = cls_logits.shape[1]
    classes = torch.arange(k)
    pick_c = classes[None, :] == labels.long()[:, None]
    pick_d = classes[None, :] == teacher_logits.argmax(1)[:, None]
    lc = (F.log_softmax(cls_logits, 1) * pick_c).sum(1)
    ld = (F.log_softmax(dist_logits, 1) * pick_d).sum(1)
    return -(lc.mean() + ld.mean()) / 2
''',
    },
    "jude": {  # index arithmetic with a gather of the patch grid
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w).reshape(b, c, h // patch, patch, w // patch, patch)
    x = x.permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * patch ** 2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    x = patchify(images, patch)
    w = weight.reshape(weight.shape[0], -1)
    return torch.addmm(bias, x.reshape(-1, x.shape[-1]), w.T).reshape(x.shape[0], x.shape[1], -1)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    out = torch.cat([cls_token.expand(patches.shape[0], -1, -1), patches], dim=1)
    out = out + pos_embed
    return out
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    maps = patch_proj(images)
    tokens = maps.flatten(2).swapaxes(1, 2)
    tokens = prepend_cls_add_pos(tokens, cls_token, pos_embed)
    for blk in list(blocks):
        tokens = blk(tokens)
    normed = norm(tokens)
    return head(normed[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls_tok = pos_embed[:, :1]
    d = pos_embed.shape[-1]
    g = pos_embed[:, 1:].reshape(1, *old_grid, d).permute(0, 3, 1, 2)
    g = F.interpolate(g, size=(int(new_grid[0]), int(new_grid[1])), mode="bicubic", align_corners=False)
    return torch.cat([cls_tok, g.permute(0, 2, 3, 1).flatten(1, 2)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    out = torch.cat([cls_token.expand(b, -1, -1), dist_token.expand(b, -1, -1), patches], dim=1)
    out = out + pos_embed
    return out
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    idx = torch.arange(cls_logits.shape[0])
    teacher = torch.argmax(teacher_logits, dim=1)
    lse_c = torch.logsumexp(cls_logits, dim=1)
    lse_d = torch.logsumexp(dist_logits, dim=1)
    ce_c = (lse_c - cls_logits[idx, labels.long()]).mean()
    ce_d = (lse_d - dist_logits[idx, teacher]).mean()
    return (ce_c + ce_d) / 2
''',
    },
    "kofi": {  # a patch matrix built by chunk
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    pieces = []
    for band in torch.chunk(images, h // patch, dim=2):
        for tile in torch.chunk(band, w // patch, dim=3):
            pieces.append(tile.reshape(b, 1, -1))
    return torch.cat(pieces, dim=1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    kernel = weight.reshape(weight.shape[0], -1)
    out = patchify(images, patch) @ kernel.transpose(0, 1)
    return out + bias.view(1, 1, -1)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    cls = torch.zeros(patches.shape[0], 1, patches.shape[2], dtype=patches.dtype) + cls_token
    return torch.cat([cls, patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    f = patch_proj(images)
    x = f.view(f.shape[0], f.shape[1], -1).transpose(1, 2)
    x = prepend_cls_add_pos(x, cls_token, pos_embed)
    for k in range(len(blocks)):
        x = blocks[k](x)
    return head(norm(x)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    n_old = old_grid[0] * old_grid[1]
    d = pos_embed.shape[-1]
    cls, grid = torch.split(pos_embed, [1, n_old], dim=1)
    grid = grid.reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = grid.flatten(2).permute(0, 2, 1)
    return torch.cat([cls, grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.shape
    base = torch.zeros(b, 1, d, dtype=patches.dtype)
    return torch.cat([base + cls_token, base + dist_token, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def log_probs(z):
        top = z.max(dim=1, keepdim=True).values
        return z - top - torch.log(torch.exp(z - top).sum(dim=1, keepdim=True))

    n = cls_logits.shape[0]
    r = torch.arange(n)
    t = teacher_logits.max(dim=1).indices
    return -(log_probs(cls_logits)[r, labels.long()].sum() + log_probs(dist_logits)[r, t].sum()) / (2 * n)
''',
    },
    "lior": {  # one-liners
        "patchify": '''
def patchify(images, patch):
    return images.unfold(2, patch, patch).unfold(3, patch, patch).permute(0, 2, 3, 1, 4, 5).flatten(3).flatten(1, 2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return F.linear(patchify(images, patch), weight.reshape(len(weight), -1), bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return pos_embed + torch.cat([cls_token.expand(len(patches), -1, -1), patches], 1)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = prepend_cls_add_pos(patch_proj(images).flatten(2).mT, cls_token, pos_embed)
    for blk in blocks:
        x = blk(x)
    return head(norm(x[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    g = F.interpolate(pos_embed[:, 1:].unflatten(1, tuple(old_grid)).permute(0, 3, 1, 2), size=tuple(new_grid),
                      mode="bicubic", align_corners=False)
    return torch.cat([pos_embed[:, :1], g.flatten(2).mT], 1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    return pos_embed + torch.cat([torch.cat([cls_token, dist_token], 1).expand(len(patches), -1, -1), patches], 1)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    return -(cls_logits.log_softmax(-1).gather(-1, labels.long()[:, None]).mean()
             + dist_logits.log_softmax(-1).gather(-1, teacher_logits.argmax(-1)[:, None]).mean()) / 2
''',
    },
    "maya": {  # a buffer filled patch by patch; the projection as a batched matmul
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    out = images.new_zeros(b, gh * gw, c * patch * patch)
    for i in range(gh):
        for j in range(gw):
            out[:, i * gw + j] = images[:, :, i * patch:(i + 1) * patch, j * patch:(j + 1) * patch].reshape(b, -1)
    return out
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    w = weight.reshape(weight.shape[0], -1).T.expand(p.shape[0], -1, -1)
    return torch.bmm(p, w) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    b = patches.shape[0]
    return torch.cat([cls_token.repeat(b, 1, 1) + pos_embed[:, :1], patches + pos_embed[:, 1:]], dim=1)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    grid = patch_proj(images)
    tokens = torch.stack([grid[:, :, i, j] for i in range(grid.shape[2]) for j in range(grid.shape[3])], dim=1)
    tokens = prepend_cls_add_pos(tokens, cls_token, pos_embed)
    for module in blocks:
        tokens = module(tokens)
    return head(norm(tokens)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    grid = pos_embed[0, 1:].reshape(old_grid[0], old_grid[1], d).permute(2, 0, 1).unsqueeze(0)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)[0]
    grid = grid.permute(1, 2, 0).reshape(-1, d)
    return torch.cat([pos_embed[0, :1], grid], dim=0).unsqueeze(0)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    lead = torch.cat([cls_token.repeat(b, 1, 1), dist_token.repeat(b, 1, 1)], dim=1) + pos_embed[:, :2]
    return torch.cat([lead, patches + pos_embed[:, 2:]], dim=1)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    b = cls_logits.shape[0]
    losses = []
    for i in range(b):
        ls_c = cls_logits[i] - torch.logsumexp(cls_logits[i], 0)
        ls_d = dist_logits[i] - torch.logsumexp(dist_logits[i], 0)
        losses.append(-(ls_c[labels[i].long()] + ls_d[teacher_logits[i].argmax()]) / 2)
    return torch.stack(losses).mean()
''',
    },
    "noor": {  # everything through helpers in a cell of her own
        "patchify": '''
def patchify(images, patch):
    return to_patch_rows(images, patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return affine(patchify(images, patch), weight.reshape(weight.shape[0], -1), bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([batch_of(cls_token, patches), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = prepend_cls_add_pos(feature_tokens(patch_proj(images)), cls_token, pos_embed)
    for blk in blocks:
        x = blk(x)
    return head(norm(x)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    img = feature_image(pos_embed[:, 1:], old_grid)
    img = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([pos_embed[:, :1], feature_tokens(img)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    return torch.cat([batch_of(cls_token, patches), batch_of(dist_token, patches), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    return 0.5 * (cross_entropy_of(cls_logits, labels) + cross_entropy_of(dist_logits, teacher_logits.argmax(-1)))
''',
    },
}

#: cells the learners added, each after the solution cell it follows
ADDED = {
    "dina": [("patchify", '''
import functools
''')],
    "noor": [("patchify", '''
def to_patch_rows(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, (h // patch) * (w // patch), c * patch * patch)


def affine(x, w, b):
    return x @ w.T + b


def batch_of(token, like):
    return token.expand(like.shape[0], -1, -1)


def feature_tokens(grid):
    """(B, D, gh, gw) -> (B, gh * gw, D)."""
    return grid.flatten(2).transpose(1, 2)


def feature_image(tokens, grid):
    """(1, gh * gw, D) -> (1, D, gh, gw)."""
    return tokens.transpose(1, 2).reshape(1, tokens.shape[-1], grid[0], grid[1])


def cross_entropy_of(logits, target):
    return -(logits.log_softmax(dim=-1).gather(-1, target.long().unsqueeze(-1))).mean()
''')],
}
