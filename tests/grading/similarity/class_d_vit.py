"""Planted class D (held out), 09-vision-transformer: fifteen learners who worked alone, written once the rule
that the book's code is evidence of nothing between two learners was final, as data.

As class_d_attention.py: each learner's code in a style of its own (``F.pixel_unshuffle``, ``as_strided``,
``movedim``, an einsum permutation, a patch grid read by advanced indexing, ``Tensor.unfold``, ``F.linear``,
``addmm``, ``nn.Upsample``, ``nn.Sequential`` over the blocks, the CLS token's position added before the
concatenation, a one-hot or masked pick of the target, the diagonal of a picked matrix, logsumexp, ...). Three
learners write the book's code on most exercises: bex as the book shows it (6 of 7), gwen behind helpers in a cell
of her own (6 of 7), mika behind helpers nested in each function (5 of 7). Every one of them passes the hidden
checks (``python -m tests.grading.similarity.planted check d``).
"""

INDEPENDENT = {
    "alma": {  # pixel_unshuffle; F.linear; repeat; nn.Sequential; nn.Upsample; a gathered target
        "patchify": '''
def patchify(images, patch):
    cols = F.pixel_unshuffle(images, patch)
    return cols.flatten(2).transpose(1, 2)
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
    x = patch_proj(images).flatten(2).transpose(1, 2)
    x = nn.Sequential(*blocks)(prepend_cls_add_pos(x, cls_token, pos_embed))
    return head(norm(x[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    grid = pos_embed[:, 1:].reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    up = nn.Upsample(size=tuple(new_grid), mode="bicubic", align_corners=False)
    resized = up(grid).permute(0, 2, 3, 1).reshape(1, -1, d)
    return torch.cat([pos_embed[:, :1], resized], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    n = patches.size(0)
    return torch.cat((cls_token.repeat(n, 1, 1), dist_token.repeat(n, 1, 1), patches), dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    teacher = teacher_logits.argmax(dim=1)
    lp_cls = F.log_softmax(cls_logits, dim=1)
    lp_dist = F.log_softmax(dist_logits, dim=1)
    ce_cls = -lp_cls.gather(1, labels.unsqueeze(1)).mean()
    ce_dist = -lp_dist.gather(1, teacher.unsqueeze(1)).mean()
    return 0.5 * (ce_cls + ce_dist)
''',
    },
    "bex": {  # the book's code, as the chapter shows it; the loss through logsumexp
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    x = x.permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // patch) * (w // patch), c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    patches = patchify(images, patch)
    return patches @ weight.reshape(weight.shape[0], -1).T + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    cls = cls_token.expand(patches.shape[0], -1, -1)
    return torch.cat([cls, patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    tokens = patch_proj(images).flatten(2).transpose(1, 2)
    tokens = prepend_cls_add_pos(tokens, cls_token, pos_embed)
    for block in blocks:
        tokens = block(tokens)
    return head(norm(tokens)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    d = grid.shape[-1]
    img = grid.reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = img.permute(0, 2, 3, 1).reshape(1, new_grid[0] * new_grid[1], d)
    return torch.cat([cls, grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    prefix = torch.cat([cls_token, dist_token], dim=1).expand(b, -1, -1)
    return torch.cat([prefix, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    y_t = teacher_logits.argmax(dim=-1)
    ce_cls = (torch.logsumexp(cls_logits, dim=-1) - cls_logits[rows, labels]).mean()
    ce_dist = (torch.logsumexp(dist_logits, dim=-1) - dist_logits[rows, y_t]).mean()
    return (ce_cls + ce_dist) / 2
''',
    },
    "cyra": {  # unflatten and movedim; an einsum; a buffer filled; a while loop; split; logsumexp by hand
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.unflatten(2, (h // patch, patch)).unflatten(4, (w // patch, patch))
    x = x.movedim((1, 3), (3, 4))
    return x.flatten(3).flatten(1, 2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    kernel = weight.flatten(1)
    return torch.einsum("bnk,dk->bnd", patchify(images, patch), kernel) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    b, n, d = patches.shape
    out = patches.new_empty(b, n + 1, d)
    out[:, :1] = cls_token
    out[:, 1:] = patches
    return out + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    feats = patch_proj(images)
    b, d = feats.shape[:2]
    x = prepend_cls_add_pos(feats.reshape(b, d, -1).permute(0, 2, 1), cls_token, pos_embed)
    i = 0
    while i < len(blocks):
        x = blocks[i](x)
        i += 1
    return head(norm(x)[:, 0, :])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    gh, gw = old_grid
    cls, grid = torch.split(pos_embed, [1, gh * gw], dim=1)
    img = grid.transpose(1, 2).reshape(1, -1, gh, gw)
    img = F.interpolate(img, size=(new_grid[0], new_grid[1]), mode="bicubic", align_corners=False)
    return torch.cat([cls, img.flatten(2).transpose(1, 2)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.shape
    out = patches.new_empty(b, n + 2, d)
    out[:, 0] = cls_token[:, 0]
    out[:, 1] = dist_token[:, 0]
    out[:, 2:] = patches
    return out + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def ce(logits, target):
        top = logits.max(dim=-1, keepdim=True).values
        log_z = top.squeeze(-1) + (logits - top).exp().sum(dim=-1).log()
        picked = logits.gather(-1, target[:, None]).squeeze(-1)
        return (log_z - picked).mean()

    return (ce(cls_logits, labels) + ce(dist_logits, teacher_logits.argmax(-1))) * 0.5
''',
    },
    "dax": {  # as_strided; addmm; the positions added to each part; a one-hot pick
        "patchify": '''
def patchify(images, patch):
    x = images.contiguous()
    b, c, h, w = x.shape
    sb, sc, sh, sw = x.stride()
    tiles = x.as_strided((b, h // patch, w // patch, c, patch, patch),
                         (sb, sh * patch, sw * patch, sc, sh, sw))
    return tiles.reshape(b, (h // patch) * (w // patch), -1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    b, n, k = p.shape
    out = torch.addmm(bias, p.reshape(b * n, k), weight.reshape(weight.shape[0], k).t())
    return out.reshape(b, n, -1)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    head = (cls_token + pos_embed[:, :1]).expand(patches.shape[0], 1, patches.shape[2])
    return torch.cat([head, patches + pos_embed[:, 1:]], dim=1)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    f = patch_proj(images)
    tokens = f.permute(0, 2, 3, 1).reshape(f.shape[0], -1, f.shape[1])
    tokens = prepend_cls_add_pos(tokens, cls_token, pos_embed)
    for layer in blocks:
        tokens = layer(tokens)
    cls = norm(tokens)[:, 0]
    return head(cls)
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    if tuple(old_grid) == tuple(new_grid):
        return pos_embed
    body = pos_embed[0, 1:]
    img = body.t().reshape(1, body.shape[1], old_grid[0], old_grid[1])
    img = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=False)
    body = img.reshape(body.shape[1], -1).t().unsqueeze(0)
    return torch.cat([pos_embed[:, :1], body], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    first = (cls_token + pos_embed[:, 0:1]).expand(b, -1, -1)
    second = (dist_token + pos_embed[:, 1:2]).expand(b, -1, -1)
    return torch.cat([first, second, patches + pos_embed[:, 2:]], dim=1)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    k = cls_logits.shape[-1]
    one_cls = F.one_hot(labels, k).to(cls_logits.dtype)
    one_dist = F.one_hot(teacher_logits.argmax(-1), k).to(dist_logits.dtype)
    loss_cls = -(torch.log_softmax(cls_logits, -1) * one_cls).sum(-1).mean()
    loss_dist = -(torch.log_softmax(dist_logits, -1) * one_dist).sum(-1).mean()
    return loss_cls / 2 + loss_dist / 2
''',
    },
    "edda": {  # a chain of views and transposes; mm; tile; the loss of both heads stacked
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    x = images.reshape(b, c, gh, patch, gw, patch)
    x = x.transpose(1, 2)          # b, gh, c, p, gw, p
    x = x.transpose(2, 4)          # b, gh, gw, p, c, p
    x = x.transpose(3, 4)          # b, gh, gw, c, p, p
    return x.reshape(b, gh * gw, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    w = weight.reshape(weight.size(0), -1)
    return torch.matmul(p, w.t()) + bias.reshape(1, 1, -1)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    tokens = torch.cat([cls_token.tile(patches.shape[0], 1, 1), patches], dim=-2)
    return tokens + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    out = patch_proj(images)
    out = out.view(out.size(0), out.size(1), -1).transpose(-1, -2)
    out = prepend_cls_add_pos(out, cls_token, pos_embed)
    for _, blk in enumerate(blocks):
        out = blk(out)
    out = norm(out)
    return head(out[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.size(-1)
    grid = pos_embed[:, 1:].double().view(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, d).to(pos_embed.dtype)
    return torch.cat((pos_embed[:, :1], grid), dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    prefix = torch.cat([cls_token, dist_token], dim=1).tile(patches.shape[0], 1, 1)
    return torch.cat([prefix, patches], dim=-2) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    logits = torch.stack([cls_logits, dist_logits])
    targets = torch.stack([labels, teacher_logits.argmax(-1)])
    logp = torch.log_softmax(logits, dim=-1)
    picked = torch.gather(logp, 2, targets.unsqueeze(-1)).squeeze(-1)
    return -picked.mean(dim=1).mean()
''',
    },
    "flo": {  # loops over the grid; a broadcast product; a zero buffer; index loops; take_along_dim
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    rows = []
    for top in range(0, h, patch):
        for left in range(0, w, patch):
            rows.append(images[:, :, top:top + patch, left:left + patch].flatten(1))
    return torch.stack(rows, dim=1)
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
    cls = torch.zeros(b, 1, d, dtype=patches.dtype) + cls_token
    return torch.cat([cls, patches], 1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = patch_proj(images)
    x = x.flatten(start_dim=2).transpose(1, 2)
    x = prepend_cls_add_pos(x, cls_token, pos_embed)
    for i in range(len(blocks)):
        x = blocks[i](x)
    return head(norm(x))[:, 0]
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    old_h, old_w = old_grid
    new_h, new_w = new_grid
    d = pos_embed.shape[2]
    grid = pos_embed[:, 1:, :].reshape(1, old_h, old_w, d).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(new_h, new_w), mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, new_h * new_w, d)
    return torch.cat([pos_embed[:, :1, :], grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.shape
    zeros = torch.zeros(b, 1, d, dtype=patches.dtype)
    return torch.cat([zeros + cls_token, zeros + dist_token, patches], 1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    t = torch.argmax(teacher_logits, dim=1)
    a = torch.take_along_dim(torch.log_softmax(cls_logits, 1), labels[:, None], dim=1)
    b = torch.take_along_dim(torch.log_softmax(dist_logits, 1), t[:, None], dim=1)
    return -(a.mean() + b.mean()) / 2
''',
    },
    "gwen": {  # the book's code, behind helpers in a cell of her own; the loss with one-hot targets
        "patchify": '''
def patchify(images, patch):
    return cut_grid(images, patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return project(patchify(images, patch), weight, bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([batch_token(cls_token, patches), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    tokens = prepend_cls_add_pos(feature_tokens(patch_proj(images)), cls_token, pos_embed)
    for block in blocks:
        tokens = block(tokens)
    return head(norm(tokens)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    return torch.cat([pos_embed[:, :1], resize_grid(pos_embed[:, 1:], old_grid, new_grid)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    prefix = batch_token(torch.cat([cls_token, dist_token], dim=1), patches)
    return torch.cat([prefix, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    return 0.5 * one_hot_ce(cls_logits, labels) + 0.5 * one_hot_ce(dist_logits, teacher_logits.argmax(dim=-1))
''',
    },
    "ike": {  # an einsum permutation; the weight as a batched product; torch.stack for the prefix
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    x = torch.einsum("bcipjq->bijcpq", x)
    return x.reshape(b, -1, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    w = weight.reshape(weight.shape[0], -1).T.unsqueeze(0).expand(p.shape[0], -1, -1)
    return torch.bmm(p, w) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    cls = cls_token.expand(len(patches), 1, -1)
    return torch.concat([cls, patches], dim=1).add(pos_embed)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    grid = patch_proj(images)
    seq = torch.einsum("bdhw->bhwd", grid).flatten(1, 2)
    seq = prepend_cls_add_pos(seq, cls_token, pos_embed)
    for blk in blocks:
        seq = blk(seq)
    return head(norm(seq[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls_part = pos_embed[:, :1]
    grid = pos_embed[:, 1:].unflatten(1, tuple(old_grid))
    grid = torch.einsum("bhwd->bdhw", grid)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = torch.einsum("bdhw->bhwd", grid).flatten(1, 2)
    return torch.cat([cls_part, grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    prefix = torch.stack([cls_token[0, 0], dist_token[0, 0]])
    prefix = prefix.unsqueeze(0).expand(len(patches), -1, -1)
    return torch.concat([prefix, patches], dim=1).add(pos_embed)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    idx = torch.arange(len(labels))
    teacher = teacher_logits.max(dim=-1).indices
    part_a = F.log_softmax(cls_logits, -1)[idx, labels]
    part_b = F.log_softmax(dist_logits, -1)[idx, teacher]
    return -(part_a + part_b).mean() / 2
''',
    },
    "joss": {  # Tensor.unfold twice; tensordot; a mask of the targets
        "patchify": '''
def patchify(images, patch):
    b, c = images.shape[:2]
    x = images.unfold(2, patch, patch).unfold(3, patch, patch)
    x = x.permute(0, 2, 3, 1, 4, 5)
    return x.reshape(b, x.shape[1] * x.shape[2], -1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    return torch.tensordot(p, weight.reshape(len(weight), -1), dims=([2], [1])) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    b = patches.shape[0]
    return torch.cat([cls_token.expand(b, 1, cls_token.shape[-1]), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    emb = patch_proj(images)
    emb = emb.reshape(*emb.shape[:2], -1).transpose(1, 2)
    h = prepend_cls_add_pos(emb, cls_token, pos_embed)
    for module in blocks:
        h = module(h)
    h = norm(h)
    return head(h[:, 0, :])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    width = pos_embed.shape[-1]
    img = pos_embed[:, 1:].reshape(1, *old_grid, width).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=False)
    seq = img.reshape(1, width, -1).permute(0, 2, 1)
    return torch.cat([pos_embed[:, :1], seq], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, _, d = patches.shape
    cls = cls_token.expand(b, 1, d)
    dist = dist_token.expand(b, 1, d)
    return torch.cat([cls, dist, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    classes = torch.arange(cls_logits.shape[1])
    hit_cls = classes[None, :] == labels[:, None]
    hit_dist = classes[None, :] == teacher_logits.argmax(1)[:, None]
    nll_cls = -torch.log_softmax(cls_logits, 1).masked_fill(~hit_cls, 0).sum(1)
    nll_dist = -torch.log_softmax(dist_logits, 1).masked_fill(~hit_dist, 0).sum(1)
    return (nll_cls.mean() + nll_dist.mean()) / 2
''',
    },
    "kit": {  # one-liners where they fit
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    grid = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return grid.permute(0, 2, 4, 1, 3, 5).flatten(3).flatten(1, 2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return patchify(images, patch) @ weight.flatten(1).mT + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([cls_token.expand(len(patches), -1, -1), patches], 1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = prepend_cls_add_pos(patch_proj(images).flatten(2).mT, cls_token, pos_embed)
    for b in blocks:
        x = b(x)
    return head(norm(x)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    g = F.interpolate(pos_embed[:, 1:].mT.unflatten(2, tuple(old_grid)), size=tuple(new_grid), mode="bicubic",
                      align_corners=False)
    return torch.cat([pos_embed[:, :1], g.flatten(2).mT], 1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    return torch.cat([cls_token.expand(len(patches), -1, -1), dist_token.expand(len(patches), -1, -1), patches],
                     1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    return -(cls_logits.log_softmax(-1).gather(-1, labels[:, None]).mean()
             + dist_logits.log_softmax(-1).gather(-1, teacher_logits.argmax(-1)[:, None]).mean()) / 2
''',
    },
    "lum": {  # movedim; the projection summed over the patch's channels and pixels; the diagonal of the picks
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch).movedim(1, 3)
    x = x.movedim(4, 2).transpose(3, 4)
    return x.reshape(b, (h // patch) * (w // patch), c * patch * patch).contiguous()
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    b, c, h, w = images.shape
    d = weight.shape[0]
    tiles = patchify(images, patch).reshape(b, -1, c, patch, patch)
    out = torch.einsum("bncij,dcij->bnd", tiles, weight)
    return out + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    x = F.pad(patches, (0, 0, 1, 0))
    first = torch.zeros_like(x)
    first[:, :1] = cls_token
    return x + first + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    grid = patch_proj(images)
    seq = grid.flatten(2).permute(0, 2, 1)
    seq = prepend_cls_add_pos(seq, cls_token, pos_embed)
    for block in list(blocks):
        seq = block(seq)
    return head(norm(seq).select(1, 0))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    first, rest = pos_embed[:, :1], pos_embed[:, 1:]
    img = rest.movedim(2, 1).reshape(1, rest.shape[2], old_grid[0], old_grid[1])
    img = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([first, img.flatten(2).movedim(1, 2)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    x = F.pad(patches, (0, 0, 2, 0))
    lead = torch.zeros_like(x)
    lead[:, :1] = cls_token
    lead[:, 1:2] = dist_token
    return x + lead + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    lp_c = torch.log_softmax(cls_logits, dim=-1)
    lp_d = torch.log_softmax(dist_logits, dim=-1)
    pick_c = lp_c[:, labels].diagonal()
    pick_d = lp_d[:, teacher_logits.argmax(dim=-1)].diagonal()
    return -0.5 * pick_c.mean() - 0.5 * pick_d.mean()
''',
    },
    "mika": {  # the book's code behind helpers nested in each function; float64 through the resize; gather
        "patchify": '''
def patchify(images, patch):
    def cells(n):
        return n // patch

    b, c, h, w = images.shape
    x = images.reshape(b, c, cells(h), patch, cells(w), patch)
    x = x.permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, cells(h) * cells(w), c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    def flat(wt):
        return wt.reshape(wt.shape[0], -1)

    patches = patchify(images, patch)
    return patches @ flat(weight).T + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    def batched(tok):
        return tok.expand(patches.shape[0], -1, -1)

    return torch.cat([batched(cls_token), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    def sequence(feature_map):
        return feature_map.flatten(2).transpose(1, 2)

    def encode(tokens):
        for block in blocks:
            tokens = block(tokens)
        return tokens

    tokens = encode(prepend_cls_add_pos(sequence(patch_proj(images)), cls_token, pos_embed))
    return head(norm(tokens)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    def to_map(t, g):
        return t.reshape(1, g[0], g[1], -1).permute(0, 3, 1, 2)

    grid = to_map(pos_embed[:, 1:].to(torch.float64), old_grid)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = grid.flatten(2).transpose(1, 2).to(pos_embed.dtype)
    return torch.cat([pos_embed[:, :1], grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    def batched(tok):
        return tok.expand(patches.shape[0], -1, -1)

    prefix = batched(torch.cat([cls_token, dist_token], dim=1))
    return torch.cat([prefix, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def nll(logits, target):
        logp = torch.log_softmax(logits, dim=-1)
        return -logp.gather(1, target.view(-1, 1)).squeeze(1).mean()

    return 0.5 * nll(cls_logits, labels) + 0.5 * nll(dist_logits, teacher_logits.argmax(dim=-1))
''',
    },
    "nash": {  # the patch grid read by advanced indexing; a sum over the heads' losses
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    offs = torch.arange(patch)
    rows = (torch.arange(h // patch) * patch)[:, None] + offs
    cols = (torch.arange(w // patch) * patch)[:, None] + offs
    x = images[:, :, rows[:, None, :, None], cols[None, :, None, :]]
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    flat_w = weight.reshape(weight.shape[0], -1)
    p = patchify(images, patch)
    return torch.matmul(p, flat_w.transpose(0, 1)).add(bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    b, n, d = patches.shape
    cls = cls_token.reshape(1, 1, d).expand(b, 1, d)
    return torch.cat([cls, patches], dim=1).add(pos_embed)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    z = patch_proj(images)
    b, d, gh, gw = z.shape
    z = z.reshape(b, d, gh * gw).transpose(1, 2)
    z = prepend_cls_add_pos(z, cls_token, pos_embed)
    for blk in blocks:
        z = blk(z)
    return head(norm(z[:, :1]).squeeze(1))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    (a, b), (c, e) = old_grid, new_grid
    d = pos_embed.shape[-1]
    m = pos_embed[0, 1:].reshape(a, b, d).permute(2, 0, 1).unsqueeze(0)
    m = F.interpolate(m, size=(c, e), mode="bicubic", align_corners=False)
    return torch.cat([pos_embed[:, :1], m[0].permute(1, 2, 0).reshape(1, c * e, d)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.shape
    two = torch.cat([cls_token.reshape(1, 1, d), dist_token.reshape(1, 1, d)], dim=1)
    return torch.cat([two.expand(b, 2, d), patches], dim=1).add(pos_embed)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    b = labels.shape[0]
    lse_c = torch.logsumexp(cls_logits, dim=1)
    lse_d = torch.logsumexp(dist_logits, dim=1)
    t = teacher_logits.argmax(dim=1)
    total = (lse_c - cls_logits.gather(1, labels[:, None])[:, 0]).sum()
    total = total + (lse_d - dist_logits.gather(1, t[:, None])[:, 0]).sum()
    return total / (2 * b)
''',
    },
    "oda": {  # chunks and cat; the bias broadcast by hand; the positions added token by token
        "patchify": '''
def patchify(images, patch):
    b = images.shape[0]
    strips = images.chunk(images.shape[2] // patch, dim=2)
    tiles = [t for s in strips for t in s.chunk(images.shape[3] // patch, dim=3)]
    return torch.cat([t.reshape(b, 1, -1) for t in tiles], dim=1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    w = weight.reshape(weight.shape[0], -1)
    return p @ w.transpose(-1, -2) + bias[None, None, :]
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    seq = [cls_token.expand(patches.shape[0], 1, -1)] + list(patches.split(1, dim=1))
    return torch.cat([t + pos_embed[:, i:i + 1] for i, t in enumerate(seq)], dim=1)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    f = patch_proj(images)
    tokens = torch.stack([f[:, :, i, j] for i in range(f.shape[2]) for j in range(f.shape[3])], dim=1)
    tokens = prepend_cls_add_pos(tokens, cls_token, pos_embed)
    for blk in blocks:
        tokens = blk(tokens)
    return head(norm(tokens)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    pos = pos_embed[:, 1:].reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    pos = F.interpolate(pos, size=tuple(new_grid), mode="bicubic", align_corners=False)
    pos = torch.stack([pos[0, :, i, j] for i in range(new_grid[0]) for j in range(new_grid[1])])
    return torch.cat([pos_embed[:, :1], pos.unsqueeze(0)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    seq = [cls_token.expand(b, 1, -1), dist_token.expand(b, 1, -1)] + list(patches.split(1, dim=1))
    return torch.cat([t + pos_embed[:, i:i + 1] for i, t in enumerate(seq)], dim=1)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    losses = []
    for logits, target in ((cls_logits, labels), (dist_logits, teacher_logits.argmax(-1))):
        logp = torch.log_softmax(logits, dim=-1)
        losses.append(-torch.stack([logp[i, target[i]] for i in range(len(target))]).mean())
    return sum(losses) / 2
''',
    },
    "pim": {  # a pixel index table; the embedding as a sum of per-channel products; float64 sums in the loss
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    x = images.reshape(b, c, gh, patch, gw * patch)
    x = x.reshape(b, c, gh, patch, gw, patch).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, gh, gw, -1).reshape(b, gh * gw, -1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    c = images.shape[1]
    p = patchify(images, patch).unflatten(-1, (c, patch * patch))
    w = weight.reshape(weight.shape[0], c, patch * patch)
    out = sum(p[:, :, ch] @ w[:, ch].T for ch in range(c))
    return out + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    batch = patches.shape[0]
    return torch.cat([cls_token.broadcast_to(batch, 1, patches.shape[-1]), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    fm = patch_proj(images)
    seq = fm.flatten(-2).swapaxes(-1, -2)
    seq = prepend_cls_add_pos(seq, cls_token, pos_embed)
    it = iter(blocks)
    for blk in it:
        seq = blk(seq)
    return head(norm(seq))[:, 0, :]
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls_pos = pos_embed.narrow(1, 0, 1)
    grid = pos_embed.narrow(1, 1, old_grid[0] * old_grid[1])
    grid = grid.reshape(1, old_grid[0], old_grid[1], -1).permute(0, 3, 1, 2).contiguous()
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).flatten(1, 2)
    return torch.cat([cls_pos, grid], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    batch, _, d = patches.shape
    prefix = torch.cat([cls_token, dist_token], dim=1).broadcast_to(batch, 2, d)
    return torch.cat([prefix, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def ce(logits, target):
        logp = torch.log_softmax(logits.double(), dim=-1)
        return -logp[torch.arange(len(target)), target].sum() / len(target)

    loss = 0.5 * ce(cls_logits, labels) + 0.5 * ce(dist_logits, teacher_logits.argmax(-1))
    return loss.to(cls_logits.dtype)
''',
    },
}

#: cells a learner added, each after the solution cell it follows
ADDED = {
    "alma": [("patchify", '''
from torch import nn
''')],
    "gwen": [("patchify", '''
def cut_grid(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    x = x.permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, (h // patch) * (w // patch), c * patch * patch)


def project(x, weight, bias):
    return x @ weight.reshape(weight.shape[0], -1).T + bias


def batch_token(token, like):
    return token.expand(like.shape[0], -1, -1)


def feature_tokens(feature_map):
    return feature_map.flatten(2).transpose(1, 2)


def resize_grid(grid, old_grid, new_grid):
    d = grid.shape[-1]
    img = grid.reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return img.permute(0, 2, 3, 1).reshape(1, new_grid[0] * new_grid[1], d)


def one_hot_ce(logits, target):
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp * F.one_hot(target, logits.shape[-1])).sum(dim=-1).mean()
''')],
}
