"""Planted class B, 09-vision-transformer: twelve learners who worked alone, written apart from class A.

As class_b_attention.py; Juno writes the book's version.
"""

INDEPENDENT = {
    "abel": {
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    x = images.view(b, c, gh, patch, gw, patch) if images.is_contiguous() else images.reshape(
        b, c, gh, patch, gw, patch)
    return x.permute(0, 2, 4, 1, 3, 5).reshape(b, gh * gw, -1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return torch.nn.functional.linear(patchify(images, patch), weight.flatten(1), bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat((cls_token.expand(patches.size(0), -1, -1), patches), dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = patch_proj(images)
    x = x.flatten(2).permute(0, 2, 1)
    x = prepend_cls_add_pos(x, cls_token, pos_embed)
    for blk in blocks:
        x = blk(x)
    return head(norm(x[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    gh, gw = old_grid
    d = pos_embed.shape[-1]
    grid = pos_embed[:, 1:].reshape(1, gh, gw, d).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([pos_embed[:, :1], grid.permute(0, 2, 3, 1).reshape(1, -1, d)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.size(0)
    return torch.cat((cls_token.expand(b, -1, -1), dist_token.expand(b, -1, -1), patches), dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    y_t = teacher_logits.argmax(dim=1)
    lp_c = F.log_softmax(cls_logits, dim=1)
    lp_d = F.log_softmax(dist_logits, dim=1)
    return -(lp_c.gather(1, labels.long().unsqueeze(1)).mean() + lp_d.gather(1, y_t.unsqueeze(1)).mean()) / 2
''',
    },
    "bree": {  # loops over the grid and the batch
        "patchify": '''
def patchify(images, patch):
    n_rows, n_cols = images.shape[2] // patch, images.shape[3] // patch
    patches = []
    for r in range(n_rows):
        for c in range(n_cols):
            block = images[:, :, r * patch:(r + 1) * patch, c * patch:(c + 1) * patch]
            patches.append(block.flatten(start_dim=1))
    return torch.stack(patches, dim=1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    w = weight.reshape(weight.shape[0], -1)
    return torch.stack([x @ w.t() for x in p]) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    out = []
    for seq in patches:
        out.append(torch.cat([cls_token.squeeze(0), seq]) + pos_embed.squeeze(0))
    return torch.stack(out)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    feats = patch_proj(images)
    tokens = feats.reshape(feats.shape[0], feats.shape[1], -1).transpose(1, 2)
    tokens = prepend_cls_add_pos(tokens, cls_token, pos_embed)
    for block in blocks:
        tokens = block(tokens)
    normed = norm(tokens)
    return head(normed[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    first = pos_embed[:, :1]
    rest = pos_embed[0, 1:]
    dim = rest.shape[1]
    img = rest.reshape(old_grid[0], old_grid[1], dim).permute(2, 0, 1).unsqueeze(0)
    img = F.interpolate(img, size=(new_grid[0], new_grid[1]), mode="bicubic", align_corners=False)
    rest = img.squeeze(0).permute(1, 2, 0).reshape(-1, dim).unsqueeze(0)
    return torch.cat([first, rest], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    out = []
    for seq in patches:
        out.append(torch.cat([cls_token[0], dist_token[0], seq]) + pos_embed[0])
    return torch.stack(out)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    losses = []
    for i in range(cls_logits.shape[0]):
        a = torch.logsumexp(cls_logits[i], dim=0) - cls_logits[i][labels[i]]
        b = torch.logsumexp(dist_logits[i], dim=0) - dist_logits[i][teacher_logits[i].argmax()]
        losses.append((a + b) / 2)
    return torch.stack(losses).mean()
''',
    },
    "cruz": {  # einsum throughout
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    t = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return torch.einsum("bcxpyq->bxycpq", t).reshape(b, (h // patch) * (w // patch), c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    b, c, h, w = images.shape
    t = images.reshape(b, c, h // patch, patch, w // patch, patch)
    out = torch.einsum("bcxpyq,ocpq->bxyo", t, weight)
    return out.reshape(b, -1, weight.shape[0]) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    ones = torch.ones(patches.shape[0], 1, 1, dtype=patches.dtype)
    return torch.cat([ones * cls_token, patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    f = patch_proj(images)
    seq = torch.einsum("bdhw->bhwd", f).reshape(f.shape[0], -1, f.shape[1])
    seq = prepend_cls_add_pos(seq, cls_token, pos_embed)
    for b in blocks:
        seq = b(seq)
    return head(norm(seq)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    g = torch.einsum("hwd->dhw", pos_embed[0, 1:].reshape(old_grid[0], old_grid[1], d))[None]
    g = F.interpolate(g, size=tuple(new_grid), mode="bicubic", align_corners=False)[0]
    g = torch.einsum("dhw->hwd", g).reshape(1, -1, d)
    return torch.cat([pos_embed[:, :1], g], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    ones = torch.ones(patches.shape[0], 1, 1, dtype=patches.dtype)
    return torch.cat([ones * cls_token, ones * dist_token, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    k = cls_logits.shape[-1]
    y = F.one_hot(labels.long(), k).to(cls_logits.dtype)
    t = F.one_hot(teacher_logits.argmax(-1), k).to(dist_logits.dtype)
    return -0.5 * (torch.einsum("nk,nk->", y, cls_logits.log_softmax(-1))
                   + torch.einsum("nk,nk->", t, dist_logits.log_softmax(-1))) / cls_logits.shape[0]
''',
    },
    "dana": {  # unfold, and a loss from logsumexp
        "patchify": '''
def patchify(images, patch):
    x = images.unfold(2, patch, patch).unfold(3, patch, patch)
    b, c, gh, gw = x.shape[:4]
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, gh * gw, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return patchify(images, patch) @ weight.reshape(len(weight), -1).mT + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    b, n, d = patches.shape
    return torch.cat([cls_token.expand(b, 1, d), patches], 1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    h = patch_proj(images).flatten(2).transpose(-1, -2)
    h = prepend_cls_add_pos(h, cls_token, pos_embed)
    h = torch.nn.Sequential(*blocks)(h)
    return head(norm(h[:, 0]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    grid = pos_embed[:, 1:].transpose(1, 2).unflatten(2, tuple(old_grid))
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([pos_embed[:, :1], grid.flatten(2).transpose(1, 2)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b, n, d = patches.shape
    return torch.cat([cls_token.expand(b, 1, d), dist_token.expand(b, 1, d), patches], 1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def ce(z, y):
        return (torch.logsumexp(z, -1) - z.gather(-1, y.long()[:, None])[:, 0]).mean()
    return (ce(cls_logits, labels) + ce(dist_logits, teacher_logits.argmax(-1))) / 2
''',
    },
    "elio": {  # chunks; the loss through cross-entropy written out with a mask
        "patchify": '''
def patchify(images, patch):
    rows = torch.stack(images.chunk(images.shape[2] // patch, dim=2), dim=1)        # (B, gh, C, P, W)
    tiles = torch.stack(rows.chunk(images.shape[3] // patch, dim=4), dim=2)        # (B, gh, gw, C, P, P)
    return tiles.flatten(3).flatten(1, 2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    tokens = patchify(images, patch)
    return torch.tensordot(tokens, weight.flatten(1), dims=([-1], [-1])) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    out = patches.new_zeros(patches.shape[0], patches.shape[1] + 1, patches.shape[2])
    out = out + pos_embed
    out[:, 0] += cls_token[0, 0]
    out[:, 1:] += patches
    return out
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    maps = patch_proj(images)
    b, d = maps.shape[:2]
    seq = maps.permute(0, 2, 3, 1).reshape(b, -1, d)
    seq = torch.cat([cls_token.expand(b, -1, -1), seq], dim=1) + pos_embed
    for layer in blocks:
        seq = layer(seq)
    return head(norm(seq[:, :1]).squeeze(1))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    lead, body = pos_embed.split([1, pos_embed.shape[1] - 1], dim=1)
    d = body.shape[-1]
    body = body.reshape(1, *old_grid, d).movedim(3, 1)
    body = F.interpolate(body, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([lead, body.movedim(1, 3).reshape(1, -1, d)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    out = patches.new_zeros(patches.shape[0], patches.shape[1] + 2, patches.shape[2])
    out = out + pos_embed
    out[:, 0] += cls_token[0, 0]
    out[:, 1] += dist_token[0, 0]
    out[:, 2:] += patches
    return out
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    k = torch.arange(cls_logits.shape[1])
    on_true = (k == labels.long()[:, None]).to(cls_logits.dtype)
    on_teacher = (k == teacher_logits.argmax(1)[:, None]).to(dist_logits.dtype)
    nll_true = -(cls_logits.log_softmax(1) * on_true).sum(1)
    nll_teacher = -(dist_logits.log_softmax(1) * on_teacher).sum(1)
    return (nll_true.mean() + nll_teacher.mean()) * 0.5
''',
    },
    "faye": {  # helpers of her own in an added cell
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    grid = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return to_tokens(grid.permute(0, 2, 4, 1, 3, 5))
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return affine(patchify(images, patch), weight.flatten(1), bias)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([tiled(cls_token, patches), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    z = patch_proj(images)
    z = to_tokens(z.permute(0, 2, 3, 1))
    z = prepend_cls_add_pos(z, cls_token, pos_embed)
    for f in blocks:
        z = f(z)
    return head(norm(z)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    pic = pos_embed[:, 1:].reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    pic = F.interpolate(pic, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([pos_embed[:, :1], to_tokens(pic.permute(0, 2, 3, 1).unsqueeze(-1))], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    return torch.cat([tiled(cls_token, patches), tiled(dist_token, patches), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    return 0.5 * nll(cls_logits, labels) + 0.5 * nll(dist_logits, teacher_logits.argmax(-1))
''',
    },
    "gabe": {  # transposes instead of permute
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    x = x.transpose(3, 4)           # b c gh gw p p
    x = x.transpose(1, 2).transpose(2, 3)   # b gh gw c p p
    return x.reshape(b, -1, c * patch ** 2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    return torch.matmul(p, weight.reshape(weight.shape[0], -1).transpose(-1, -2)) + bias[None, None]
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    head = cls_token.repeat(patches.shape[0], 1, 1)
    return torch.cat([head, patches], dim=-2) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = patch_proj(images)
    x = x.reshape(*x.shape[:2], -1).transpose(-2, -1)
    x = prepend_cls_add_pos(x, cls_token, pos_embed)
    for i in range(len(blocks)):
        x = blocks[i](x)
    return head(norm(x)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    n_new = new_grid[0] * new_grid[1]
    g = pos_embed[:, 1:].transpose(-2, -1).reshape(1, -1, old_grid[0], old_grid[1])
    g = F.interpolate(g, size=(int(new_grid[0]), int(new_grid[1])), mode="bicubic", align_corners=False)
    g = g.reshape(1, -1, n_new).transpose(-2, -1)
    return torch.cat([pos_embed[:, :1], g], dim=-2)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    n = patches.shape[0]
    return torch.cat([cls_token.repeat(n, 1, 1), dist_token.repeat(n, 1, 1), patches], dim=-2) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(len(labels))
    a = cls_logits.log_softmax(-1)[rows, labels.long()]
    b = dist_logits.log_softmax(-1)[rows, teacher_logits.argmax(-1)]
    return -(a.mean() + b.mean()) / 2
''',
    },
    "hugo": {  # index arithmetic: the patches gathered by a computed index
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    gh, gw = h // patch, w // patch
    x = images.reshape(b, c, gh, patch, gw, patch)
    order = [0, 2, 4, 1, 3, 5]
    return x.permute(*order).reshape(b, gh * gw, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    x = patchify(images, patch)
    b, n, k = x.shape
    return (x.reshape(b * n, k) @ weight.reshape(-1, k).T + bias).reshape(b, n, -1)
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    cls_row = (cls_token + pos_embed[:, :1]).expand(len(patches), 1, -1)
    return torch.cat([cls_row, patches + pos_embed[:, 1:]], dim=1)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = patch_proj(images).flatten(2).transpose(1, 2)
    t = torch.cat([cls_token.expand(t.shape[0], -1, -1), t], dim=1) + pos_embed
    for block in blocks:
        t = block(t)
    return head(norm(t))[:, 0]
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls_pos, patch_pos = pos_embed[:, :1], pos_embed[:, 1:]
    d = patch_pos.shape[2]
    patch_pos = patch_pos.reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    patch_pos = F.interpolate(patch_pos, size=list(new_grid), mode="bicubic", align_corners=False)
    patch_pos = patch_pos.flatten(2).transpose(1, 2)
    return torch.cat((cls_pos, patch_pos), 1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    lead = (torch.cat([cls_token, dist_token], dim=1) + pos_embed[:, :2]).expand(len(patches), -1, -1)
    return torch.cat([lead, patches + pos_embed[:, 2:]], dim=1)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    n, k = cls_logits.shape
    flat = torch.arange(n) * k
    a = cls_logits.log_softmax(1).flatten()[flat + labels.long()]
    b = dist_logits.log_softmax(1).flatten()[flat + teacher_logits.argmax(1)]
    return -0.5 * (a.mean() + b.mean())
''',
    },
    "iris": {  # a comprehension over the grid; the CLS token by broadcasting a zero tensor
        "patchify": '''
def patchify(images, patch):
    _, _, h, w = images.shape
    cells = [images[..., y:y + patch, x:x + patch] for y in range(0, h, patch) for x in range(0, w, patch)]
    return torch.stack([cell.reshape(cell.shape[0], -1) for cell in cells], dim=1)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    return torch.einsum("bnk,dk->bnd", patchify(images, patch), weight.reshape(weight.shape[0], -1)) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    zeros = torch.zeros_like(patches[:, :1])
    return torch.cat([zeros + cls_token, patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    emb = patch_proj(images)
    emb = emb.view(emb.shape[0], emb.shape[1], -1).permute(0, 2, 1)
    emb = prepend_cls_add_pos(emb, cls_token, pos_embed)
    for blk in blocks:
        emb = blk(emb)
    return head(norm(emb[:, 0, :]))
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.shape[-1]
    sq = pos_embed[0, 1:].T.reshape(1, d, *old_grid)
    sq = F.interpolate(sq, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([pos_embed[0, :1], sq.reshape(d, -1).T], dim=0).unsqueeze(0)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    zeros = torch.zeros_like(patches[:, :1])
    return torch.cat([zeros + cls_token, zeros + dist_token, patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    targets = [labels.long(), teacher_logits.argmax(dim=-1)]
    terms = [-(z.log_softmax(dim=-1).gather(-1, t[:, None])).mean() for z, t in zip([cls_logits, dist_logits], targets)]
    return sum(terms) / 2
''',
    },
    "juno": {  # the book's version
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
    teacher_labels = teacher_logits.argmax(dim=-1)
    ce_cls = -torch.log_softmax(cls_logits, dim=-1)[rows, labels].mean()
    ce_dist = -torch.log_softmax(dist_logits, dim=-1)[rows, teacher_labels].mean()
    return (ce_cls + ce_dist) / 2
''',
    },
    "kai": {  # view and contiguous; the classes chosen by torch.max
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.contiguous().view(b, c, h // patch, patch, w // patch, patch)
    x = x.permute(0, 2, 4, 1, 3, 5).contiguous()
    return x.view(b, -1, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    w2d = weight.contiguous().view(weight.size(0), -1)
    return torch.addmm(bias, patchify(images, patch).reshape(-1, w2d.size(1)), w2d.t()).view(
        images.size(0), -1, w2d.size(0))
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    x = torch.cat([cls_token.expand(patches.size(0), -1, -1), patches], dim=1)
    return x.add(pos_embed)
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    x = patch_proj(images)
    x = x.view(x.size(0), x.size(1), -1).transpose(1, 2).contiguous()
    x = prepend_cls_add_pos(x, cls_token, pos_embed)
    for m in blocks:
        x = m(x)
    return head(norm(x)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    d = pos_embed.size(-1)
    g = pos_embed[:, 1:].contiguous().view(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    g = F.interpolate(g, size=(new_grid[0], new_grid[1]), mode="bicubic", align_corners=False)
    g = g.permute(0, 2, 3, 1).contiguous().view(1, -1, d)
    return torch.cat([pos_embed[:, :1], g], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    x = torch.cat([cls_token, dist_token], dim=1).expand(patches.size(0), -1, -1)
    return torch.cat([x, patches], dim=1).add(pos_embed)
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    _, teacher = torch.max(teacher_logits, dim=1)
    logp1 = F.log_softmax(cls_logits, dim=1)
    logp2 = F.log_softmax(dist_logits, dim=1)
    n = logp1.size(0)
    return -(logp1[torch.arange(n), labels.long()].sum() + logp2[torch.arange(n), teacher].sum()) / (2 * n)
''',
    },
    "lux": {  # reduce over the blocks, a stable log-softmax of her own
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w).transpose(3, 4)     # b c gh w p
    x = x.reshape(b, c, h // patch, w // patch, patch, patch)          # b c gh gw q p
    return x.permute(0, 2, 3, 1, 5, 4).reshape(b, -1, c * patch * patch)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    p = patchify(images, patch)
    return (p[..., None, :] * weight.reshape(weight.shape[0], -1)).sum(-1) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([cls_token.broadcast_to(patches.shape[0], 1, patches.shape[2]), patches], dim=1) + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    import functools
    z = prepend_cls_add_pos(patch_proj(images).flatten(2).transpose(1, 2), cls_token, pos_embed)
    z = functools.reduce(lambda acc, block: block(acc), blocks, z)
    return head(norm(z)[:, 0])
''',
        "interpolate_pos_embed": '''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    rows, cols = old_grid
    d = pos_embed.shape[2]
    img = pos_embed[:, 1:].permute(0, 2, 1).reshape(1, d, rows, cols)
    out = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([pos_embed[:, :1], out.reshape(1, d, -1).permute(0, 2, 1)], dim=1)
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    shape = (patches.shape[0], 1, patches.shape[2])
    return torch.cat([cls_token.broadcast_to(shape), dist_token.broadcast_to(shape), patches], dim=1) + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def log_probs(z):
        z = z - z.amax(dim=1, keepdim=True)
        return z - z.exp().sum(dim=1, keepdim=True).log()

    idx = torch.arange(cls_logits.shape[0])
    loss_true = -log_probs(cls_logits)[idx, labels.long()].mean()
    loss_teacher = -log_probs(dist_logits)[idx, teacher_logits.argmax(dim=1)].mean()
    return (loss_true + loss_teacher) / 2
''',
    },
}

ADDED = {
    "faye": [("patchify", '''
def to_tokens(grid):
    """(B, gh, gw, ...) -> (B, gh * gw, prod(...))."""
    return grid.reshape(grid.shape[0], grid.shape[1] * grid.shape[2], -1)


def affine(x, w, b):
    return x @ w.T + b


def tiled(token, like):
    return token.expand(like.shape[0], -1, -1)


def nll(logits, target):
    return -logits.log_softmax(dim=-1).gather(-1, target.long().unsqueeze(-1)).mean()
''')],
}

#: learners whose own work holds one exercise copied from a classmate (class_b.py puts the copy in)
COPIERS_OF_ONE = {
    "mara": {
        "patchify": '''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return torch.permute(x, (0, 2, 4, 1, 3, 5)).flatten(start_dim=3).flatten(start_dim=1, end_dim=2)
''',
        "patch_embed": '''
def patch_embed(images, weight, bias, patch):
    tokens = patchify(images, patch)
    return torch.matmul(tokens, weight.reshape(weight.shape[0], -1).T) + bias
''',
        "prepend_cls_add_pos": '''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    stacked = torch.cat([cls_token.repeat(patches.shape[0], 1, 1), patches], dim=1)
    return stacked + pos_embed
''',
        "vit_forward": '''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    seq = patch_proj(images).permute(0, 2, 3, 1).flatten(1, 2)
    seq = prepend_cls_add_pos(seq, cls_token, pos_embed)
    for module in blocks:
        seq = module(seq)
    return head(norm(seq[:, 0]))
''',
        "prepend_cls_and_distillation_tokens": '''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    stacked = torch.cat([cls_token.repeat(patches.shape[0], 1, 1), dist_token.repeat(patches.shape[0], 1, 1),
                         patches], dim=1)
    return stacked + pos_embed
''',
        "hard_distillation_loss": '''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    pick = teacher_logits.argmax(-1)
    l1 = -torch.take_along_dim(cls_logits.log_softmax(-1), labels.long()[:, None], dim=-1).mean()
    l2 = -torch.take_along_dim(dist_logits.log_softmax(-1), pick[:, None], dim=-1).mean()
    return (l1 + l2) / 2
''',
    },
}
