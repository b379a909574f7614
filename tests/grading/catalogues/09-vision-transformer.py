"""Plausible wrong implementations for assignment 09-vision-transformer, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/09-vision-transformer/vision_transformer.ipynb with ``source``; the
hidden tests of that exercise must fail on it (tests/grading/test_catalogues.py).
``mistake`` says what a learner got wrong, in the words of a reviewer.
"""

WRONG = [
    # ------------------------------------------------------------ patchify
    dict(exercise="patchify", diagnosis="Likely mistake: a plain reshape without a",
         mistake="reshape without permute: strips of pixels, not square patches", source='''
def patchify(images, patch):
    b, c, h, w = images.shape
    return images.reshape(b, (h // patch) * (w // patch), c * patch * patch)
'''),
    dict(exercise="patchify", diagnosis="Likely mistake: each patch vector is ordered",
         mistake="channel-last patch vectors (row, column, channel)", source='''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(b, -1, c * patch * patch)
'''),
    dict(exercise="patchify", diagnosis="Likely mistake: the patches come out in column-major",
         mistake="grid read column by column", source='''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(b, -1, c * patch * patch)
'''),
    dict(exercise="patchify", diagnosis="Likely mistake: inside a patch, rows and columns",
         mistake="rows and columns inside a patch swapped", source='''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch).permute(0, 2, 4, 1, 5, 3)
    return x.reshape(b, -1, c * patch * patch)
'''),
    dict(exercise="patchify", diagnosis="raised", mistake="assumes square images (uses h for both sides)", source='''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, h // patch, patch).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * patch * patch)
'''),
    dict(exercise="patchify", diagnosis="Likely mistake: the result is (B, C*P*P, N),",
         mistake="returns (B, C*P*P, N) like F.unfold", source='''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(b, c * patch * patch, -1)
'''),
    dict(exercise="patchify", diagnosis="does the exercise for you", mistake="uses F.unfold", source='''
def patchify(images, patch):
    return F.unfold(images, kernel_size=patch, stride=patch).transpose(1, 2)
'''),
    dict(exercise="patchify", diagnosis="calls the reference", mistake="calls the reference", source='''
def patchify(images, patch):
    from course_lib.vit import patchify as p
    return p(images, patch)
'''),
    dict(exercise="patchify", diagnosis="cut off from the autograd graph",
         mistake="goes through numpy (loses autograd)", source='''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.detach().numpy().reshape(b, c, h // patch, patch, w // patch, patch).transpose(0, 2, 4, 1, 3, 5)
    return torch.from_numpy(x.reshape(b, -1, c * patch * patch).copy())
'''),
    dict(exercise="patchify", diagnosis="returned dtype", mistake="casts to float32", source='''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.float().reshape(b, c, h // patch, patch, w // patch, patch).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * patch * patch)
'''),
    dict(exercise="patchify", diagnosis="Likely mistake: inside a patch, rows and columns",
         mistake="Tensor.unfold with the patch windows in (column, row) order", source='''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.unfold(2, patch, patch).unfold(3, patch, patch)   # (B, C, gh, gw, P, P)
    x = x.permute(0, 2, 3, 1, 5, 4)
    return x.reshape(b, -1, c * patch * patch)
'''),
    # ------------------------------------------------------------ patch_embed
    dict(exercise="patch_embed", diagnosis="Likely mistake: the bias is missing: add it", mistake="forgets the bias",
         source='''
def patch_embed(images, weight, bias, patch):
    return patchify(images, patch) @ weight.reshape(weight.shape[0], -1).T
'''),
    dict(exercise="patch_embed", diagnosis="Likely mistake: the weight was flattened as",
         mistake="flattens the weight channel-last", source='''
def patch_embed(images, weight, bias, patch):
    w = weight.permute(0, 2, 3, 1).reshape(weight.shape[0], -1)
    return patchify(images, patch) @ w.T + bias
'''),
    dict(exercise="patch_embed", diagnosis="Likely mistake: the weight was reshaped to",
         mistake="no transpose of the weight (works only when D == C*P*P)", source='''
def patch_embed(images, weight, bias, patch):
    w = weight.reshape(-1, weight.shape[0])
    return patchify(images, patch) @ w + bias
'''),
    dict(exercise="patch_embed", diagnosis="does the exercise for you", mistake="uses the strided convolution",
         source='''
def patch_embed(images, weight, bias, patch):
    return F.conv2d(images, weight, bias, stride=patch).flatten(2).transpose(1, 2)
'''),
    dict(exercise="patch_embed", diagnosis="Likely mistake: a reshape without a permute",
         mistake="patches without the permute", source='''
def patch_embed(images, weight, bias, patch):
    b = images.shape[0]
    x = images.reshape(b, -1, weight[0].numel())
    return x @ weight.reshape(weight.shape[0], -1).T + bias
'''),
    dict(exercise="patch_embed", diagnosis="Likely mistake: the result is (B, D, N), the",
         mistake="transposes the output to (B, D, N)", source='''
def patch_embed(images, weight, bias, patch):
    return (patchify(images, patch) @ weight.reshape(weight.shape[0], -1).T + bias).transpose(1, 2)
'''),
    dict(exercise="patch_embed", diagnosis="Likely mistake: each patch's rows and columns",
         mistake="kernel rows and columns swapped (weight transposed per channel)", source='''
def patch_embed(images, weight, bias, patch):
    w = weight.transpose(2, 3).reshape(weight.shape[0], -1)
    return patchify(images, patch) @ w.T + bias
'''),
    dict(exercise="patch_embed", diagnosis="Likely mistake: the patches are flattened (row, column, channel)",
         mistake="cuts channel-last patches but flattens the weight as (D, C*P*P)", source='''
def patch_embed(images, weight, bias, patch):
    b, c, h, w = images.shape
    x = images.permute(0, 2, 3, 1).reshape(b, h // patch, patch, w // patch, patch, c)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(b, -1, patch * patch * c)
    return x @ weight.reshape(weight.shape[0], -1).T + bias
'''),
    dict(exercise="patch_embed", diagnosis="Likely mistake: the patches come out in column-major grid order",
         mistake="patches read column by column", source='''
def patch_embed(images, weight, bias, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch).permute(0, 4, 2, 1, 3, 5)
    x = x.reshape(b, -1, c * patch * patch)
    return x @ weight.reshape(weight.shape[0], -1).T + bias
'''),
    dict(exercise="patch_embed", diagnosis="gives wrong values", mistake="bias added to the pixels before projecting",
         source='''
def patch_embed(images, weight, bias, patch):
    return (patchify(images, patch) + bias.mean()) @ weight.reshape(weight.shape[0], -1).T
'''),
    # ------------------------------------------------------------ prepend_cls_add_pos
    dict(exercise="prepend_cls_add_pos", diagnosis="Likely mistake: the CLS token is appended",
         mistake="CLS token appended at the end", source='''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([patches, cls_token.expand(patches.shape[0], -1, -1)], dim=1) + pos_embed
'''),
    dict(exercise="prepend_cls_add_pos", diagnosis="Likely mistake: the positions are missing.", mistake="no positions",
         source='''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([cls_token.expand(patches.shape[0], -1, -1), patches], dim=1)
'''),
    dict(exercise="prepend_cls_add_pos", diagnosis="Likely mistake: the CLS token gets no position:",
         mistake="CLS gets no position", source='''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([cls_token.expand(patches.shape[0], -1, -1), patches + pos_embed[:, 1:]], dim=1)
'''),
    dict(exercise="prepend_cls_add_pos", diagnosis="Likely mistake: positions are off by one:",
         mistake="positions shifted by one", source='''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    n = patches.shape[1]
    cls = cls_token.expand(patches.shape[0], -1, -1) + pos_embed[:, n:]
    return torch.cat([cls, patches + pos_embed[:, :n]], dim=1)
'''),
    dict(exercise="prepend_cls_add_pos", diagnosis="raised", mistake="edits the patches in place", source='''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    patches += pos_embed[:, 1:]
    return torch.cat([cls_token.expand(patches.shape[0], -1, -1) + pos_embed[:, :1], patches], dim=1)
'''),
    dict(exercise="prepend_cls_add_pos", diagnosis="Likely mistake: only the first image got the",
         mistake="CLS token only for the first image (batch not expanded)", source='''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    out = torch.cat([torch.zeros_like(patches[:, :1]), patches], dim=1) + pos_embed
    first = out[:1].clone()
    first[:, 0] = first[:, 0] + cls_token[:, 0]
    return torch.cat([first, out[1:]], dim=0)
'''),
    dict(exercise="prepend_cls_add_pos", diagnosis="Likely mistake: the CLS token replaced the",
         mistake="CLS token replaces the first patch", source='''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    x = torch.cat([cls_token.expand(patches.shape[0], -1, -1), patches[:, 1:]], dim=1)
    return x + pos_embed[:, :x.shape[1]]
'''),
    dict(exercise="prepend_cls_add_pos", diagnosis="Likely mistake: concatenated along the feature",
         mistake="concatenates along the feature axis", source='''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([cls_token.expand(patches.shape[0], patches.shape[1], -1), patches], dim=2)
'''),
    dict(exercise="prepend_cls_add_pos", diagnosis="Likely mistake: the positions are added twice.",
         mistake="positions counted twice", source='''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    return torch.cat([cls_token.expand(patches.shape[0], -1, -1), patches], dim=1) + 2 * pos_embed
'''),
    # ------------------------------------------------------------ vit_forward
    dict(exercise="vit_forward", diagnosis="Likely mistake: the final LayerNorm is missing:",
         mistake="no final LayerNorm", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = prepend_cls_add_pos(patch_proj(images).flatten(2).transpose(1, 2), cls_token, pos_embed)
    for blk in blocks:
        t = blk(t)
    return head(t[:, 0])
'''),
    dict(exercise="vit_forward", diagnosis="Likely mistake: the head reads the mean of",
         mistake="mean pooling instead of the CLS token", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = prepend_cls_add_pos(patch_proj(images).flatten(2).transpose(1, 2), cls_token, pos_embed)
    for blk in blocks:
        t = blk(t)
    return head(norm(t).mean(dim=1))
'''),
    dict(exercise="vit_forward", diagnosis="Likely mistake: the head reads the last token;",
         mistake="reads the last token", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = prepend_cls_add_pos(patch_proj(images).flatten(2).transpose(1, 2), cls_token, pos_embed)
    for blk in blocks:
        t = blk(t)
    return head(norm(t)[:, -1])
'''),
    dict(exercise="vit_forward", diagnosis="Likely mistake: the position embeddings are",
         mistake="forgets the positions", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    p = patch_proj(images).flatten(2).transpose(1, 2)
    t = torch.cat([cls_token.expand(p.shape[0], -1, -1), p], dim=1)
    for blk in blocks:
        t = blk(t)
    return head(norm(t)[:, 0])
'''),
    dict(exercise="vit_forward", diagnosis="Likely mistake: only the last block is applied",
         mistake="only the last block (overwrites the loop variable)", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = prepend_cls_add_pos(patch_proj(images).flatten(2).transpose(1, 2), cls_token, pos_embed)
    for blk in blocks:
        out = blk(t)
    return head(norm(out)[:, 0])
'''),
    dict(exercise="vit_forward", diagnosis="Likely mistake: the blocks run in reverse order.",
         mistake="runs the blocks from last to first", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = prepend_cls_add_pos(patch_proj(images).flatten(2).transpose(1, 2), cls_token, pos_embed)
    for blk in reversed(blocks):
        t = blk(t)
    return head(norm(t)[:, 0])
'''),
    dict(exercise="vit_forward", diagnosis="Likely mistake: only the first block is applied.",
         mistake="applies blocks[0] only", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = prepend_cls_add_pos(patch_proj(images).flatten(2).transpose(1, 2), cls_token, pos_embed)
    t = blocks[0](t)
    return head(norm(t)[:, 0])
'''),
    dict(exercise="vit_forward", diagnosis="Likely mistake: the head is applied to every token, or the CLS",
         mistake="classifies every token (no CLS selection)", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = prepend_cls_add_pos(patch_proj(images).flatten(2).transpose(1, 2), cls_token, pos_embed)
    for blk in blocks:
        t = blk(t)
    return head(norm(t))
'''),
    dict(exercise="vit_forward", diagnosis="Likely mistake: the conv output (B, D, gh,",
         mistake="flattens the conv output with a reshape (no transpose)", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    f = patch_proj(images)
    p = f.reshape(f.shape[0], -1, f.shape[1])
    t = prepend_cls_add_pos(p, cls_token, pos_embed)
    for blk in blocks:
        t = blk(t)
    return head(norm(t)[:, 0])
'''),
    dict(exercise="vit_forward", diagnosis="Likely mistake: the LayerNorm is applied before",
         mistake="the norm applied before the blocks instead of after", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = norm(prepend_cls_add_pos(patch_proj(images).flatten(2).transpose(1, 2), cls_token, pos_embed))
    for blk in blocks:
        t = blk(t)
    return head(t[:, 0])
'''),
    dict(exercise="vit_forward", diagnosis="Likely mistake: a second residual connection",
         mistake="adds a residual around each (already residual) block", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    t = prepend_cls_add_pos(patch_proj(images).flatten(2).transpose(1, 2), cls_token, pos_embed)
    for blk in blocks:
        t = t + blk(t)
    return head(norm(t)[:, 0])
'''),
    dict(exercise="vit_forward", diagnosis="Likely mistake: the patch grid was flattened",
         mistake="grid flattened column-major", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    p = patch_proj(images).transpose(2, 3).flatten(2).transpose(1, 2)
    t = prepend_cls_add_pos(p, cls_token, pos_embed)
    for blk in blocks:
        t = blk(t)
    return head(norm(t)[:, 0])
'''),
    # ------------------------------------------------------------ interpolate_pos_embed
    dict(exercise="interpolate_pos_embed", diagnosis="Likely mistake: bilinear interpolation; the",
         mistake="bilinear instead of bicubic", source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    d = grid.shape[-1]
    img = grid.reshape(1, *old_grid, d).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=tuple(new_grid), mode="bilinear", align_corners=False)
    return torch.cat([cls, img.permute(0, 2, 3, 1).reshape(1, -1, d)], dim=1)
'''),
    dict(exercise="interpolate_pos_embed", diagnosis="Likely mistake: align_corners=True; the course",
         mistake="align_corners=True", source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    d = grid.shape[-1]
    img = grid.reshape(1, *old_grid, d).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=True)
    return torch.cat([cls, img.permute(0, 2, 3, 1).reshape(1, -1, d)], dim=1)
'''),
    dict(exercise="interpolate_pos_embed", diagnosis="Likely mistake: the CLS entry is missing from",
         mistake="interpolates the CLS entry with the grid (drops it)", source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    grid = pos_embed[:, 1:]
    d = grid.shape[-1]
    img = grid.reshape(1, *old_grid, d).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return img.permute(0, 2, 3, 1).reshape(1, -1, d)
'''),
    dict(exercise="interpolate_pos_embed", diagnosis="Likely mistake: the grid was reshaped straight",
         mistake="reshape to (1, D, gh, gw) without permute", source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    d = grid.shape[-1]
    img = grid.reshape(1, d, *old_grid)
    img = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([cls, img.reshape(1, d, -1).transpose(1, 2)], dim=1)
'''),
    dict(exercise="interpolate_pos_embed", diagnosis="Likely mistake: height and width are swapped: old_grid",
         mistake="height and width swapped", source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    d = grid.shape[-1]
    img = grid.reshape(1, old_grid[1], old_grid[0], d).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=(new_grid[1], new_grid[0]), mode="bicubic", align_corners=False)
    return torch.cat([cls, img.permute(0, 2, 3, 1).reshape(1, -1, d)], dim=1)
'''),
    dict(exercise="interpolate_pos_embed", diagnosis="Likely mistake: height and width are swapped: the grid is (rows",
         mistake="target size given as (width, height)", source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    d = grid.shape[-1]
    img = grid.reshape(1, old_grid[0], old_grid[1], d).permute(0, 3, 1, 2)
    new_h, new_w = new_grid
    img = F.interpolate(img, size=(new_w, new_h), mode="bicubic", align_corners=False)
    return torch.cat([cls, img.permute(0, 2, 3, 1).reshape(1, -1, d)], dim=1)
'''),
    dict(exercise="interpolate_pos_embed", diagnosis="Likely mistake: nearest-neighbour resizing;",
         mistake="nearest-neighbour resize", source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    d = grid.shape[-1]
    img = grid.reshape(1, *old_grid, d).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=tuple(new_grid), mode="nearest")
    return torch.cat([cls, img.permute(0, 2, 3, 1).reshape(1, -1, d)], dim=1)
'''),
    dict(exercise="interpolate_pos_embed", diagnosis="Likely mistake: the positions were interpolated",
         mistake="1-D interpolation of the flat sequence", source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    out = F.interpolate(grid.transpose(1, 2), size=new_grid[0] * new_grid[1], mode="linear", align_corners=False)
    return torch.cat([cls, out.transpose(1, 2)], dim=1)
'''),
    dict(exercise="interpolate_pos_embed", diagnosis="calls the reference", mistake="calls the reference resampler",
         source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    from course_lib.positional import resample_pos_embed
    return resample_pos_embed(pos_embed, new_grid, old_grid=old_grid)
'''),
    dict(exercise="interpolate_pos_embed", diagnosis="Likely mistake: the CLS entry is put back",
         mistake="CLS entry put at the end", source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    d = grid.shape[-1]
    img = grid.reshape(1, *old_grid, d).permute(0, 3, 1, 2)
    img = F.interpolate(img, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([img.permute(0, 2, 3, 1).reshape(1, -1, d), cls], dim=1)
'''),
    # ------------------------------------------------------------ prepend_cls_and_distillation_tokens
    dict(exercise="prepend_cls_and_distillation_tokens", diagnosis="Likely mistake: the two tokens are swapped",
         mistake="distillation token first, CLS second", source='''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    prefix = torch.cat([dist_token, cls_token], dim=1).expand(b, -1, -1)
    return torch.cat([prefix, patches], dim=1) + pos_embed
'''),
    dict(exercise="prepend_cls_and_distillation_tokens",
         diagnosis="Likely mistake: the distillation token is appended after",
         mistake="distillation token at the end of the sequence", source='''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    return torch.cat([cls_token.expand(b, -1, -1), patches, dist_token.expand(b, -1, -1)], dim=1) + pos_embed
'''),
    dict(exercise="prepend_cls_and_distillation_tokens", diagnosis="Likely mistake: the positions are missing",
         mistake="forgets the positions", source='''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    return torch.cat([cls_token.expand(b, -1, -1), dist_token.expand(b, -1, -1), patches], dim=1)
'''),
    dict(exercise="prepend_cls_and_distillation_tokens",
         diagnosis="Likely mistake: the distillation token gets no position",
         mistake="adds positions to CLS and patches only, as in a plain ViT", source='''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    cls = cls_token + pos_embed[:, :1]
    body = patches + pos_embed[:, 2:]
    return torch.cat([cls.expand(b, -1, -1), dist_token.expand(b, -1, -1), body], dim=1)
'''),
    dict(exercise="prepend_cls_and_distillation_tokens", diagnosis="Likely mistake: the two tokens get no position",
         mistake="positions on the patches only", source='''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    return torch.cat([cls_token.expand(b, -1, -1), dist_token.expand(b, -1, -1), patches + pos_embed[:, 2:]], dim=1)
'''),
    dict(exercise="prepend_cls_and_distillation_tokens", diagnosis="Likely mistake: the positions are shifted",
         mistake="patches take the plain ViT's pos_embed[:, 1:] offset", source='''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    cls = cls_token + pos_embed[:, :1]
    dist = dist_token + pos_embed[:, :1]
    return torch.cat([cls.expand(b, -1, -1), dist.expand(b, -1, -1), patches + pos_embed[:, 1:-1]], dim=1)
'''),
    dict(exercise="prepend_cls_and_distillation_tokens", diagnosis="Likely mistake: the CLS token was used twice",
         mistake="copy-paste: CLS where the distillation token belongs", source='''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    prefix = torch.cat([cls_token, cls_token], dim=1).expand(b, -1, -1)
    return torch.cat([prefix, patches], dim=1) + pos_embed
'''),
    dict(exercise="prepend_cls_and_distillation_tokens", diagnosis="returned shape",
         mistake="forgets the distillation token (a plain ViT's sequence)", source='''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    return torch.cat([cls_token.expand(b, -1, -1), patches], dim=1) + pos_embed[:, 1:]
'''),
    # ------------------------------------------------------------ hard_distillation_loss
    dict(exercise="hard_distillation_loss",
         diagnosis="Likely mistake: the distillation head learns the teacher's soft targets",
         mistake="soft targets: the teacher's softmax instead of its argmax", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    ce_cls = -torch.log_softmax(cls_logits, dim=-1)[rows, labels].mean()
    targets = torch.softmax(teacher_logits, dim=-1)
    ce_dist = -(targets * torch.log_softmax(dist_logits, dim=-1)).sum(-1).mean()
    return 0.5 * ce_cls + 0.5 * ce_dist
'''),
    dict(exercise="hard_distillation_loss", diagnosis="Likely mistake: the two terms are weighted 1 and 1",
         mistake="adds the two cross-entropies without the 1/2", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    y_t = teacher_logits.argmax(dim=-1)
    return (-torch.log_softmax(cls_logits, -1)[rows, labels] - torch.log_softmax(dist_logits, -1)[rows, y_t]).mean()
'''),
    dict(exercise="hard_distillation_loss", diagnosis="Likely mistake: the heads are swapped",
         mistake="the distillation head learns the labels, the CLS head the teacher", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    y_t = teacher_logits.argmax(dim=-1)
    ce_a = -torch.log_softmax(dist_logits, dim=-1)[rows, labels].mean()
    ce_b = -torch.log_softmax(cls_logits, dim=-1)[rows, y_t].mean()
    return 0.5 * ce_a + 0.5 * ce_b
'''),
    dict(exercise="hard_distillation_loss",
         diagnosis="Likely mistake: the teacher's softmax was taken over the batch axis",
         mistake="teacher probabilities normalized over the batch (dim=0)", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    y_t = torch.softmax(teacher_logits, dim=0).argmax(dim=1)
    ce_cls = -torch.log_softmax(cls_logits, dim=-1)[rows, labels].mean()
    ce_dist = -torch.log_softmax(dist_logits, dim=-1)[rows, y_t].mean()
    return 0.5 * ce_cls + 0.5 * ce_dist
'''),
    dict(exercise="hard_distillation_loss", diagnosis="Likely mistake: the cross-entropies are summed over the batch",
         mistake="sum over the images instead of the mean", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    y_t = teacher_logits.argmax(dim=-1)
    ce_cls = -torch.log_softmax(cls_logits, dim=-1)[rows, labels].sum()
    ce_dist = -torch.log_softmax(dist_logits, dim=-1)[rows, y_t].sum()
    return 0.5 * ce_cls + 0.5 * ce_dist
'''),
    dict(exercise="hard_distillation_loss", diagnosis="Likely mistake: the true labels were used for both heads",
         mistake="no teacher at all: both heads learn the labels", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    ce_cls = -torch.log_softmax(cls_logits, dim=-1)[rows, labels].mean()
    ce_dist = -torch.log_softmax(dist_logits, dim=-1)[rows, labels].mean()
    return 0.5 * ce_cls + 0.5 * ce_dist
'''),
    dict(exercise="hard_distillation_loss", diagnosis="Likely mistake: ties in the teacher's logits go to the last",
         mistake="an argmax written by hand with >=, which keeps the last of equal maxima", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    b, k = teacher_logits.shape
    best = torch.zeros(b, dtype=torch.long)
    for c in range(1, k):
        best = torch.where(teacher_logits[:, c] >= teacher_logits[torch.arange(b), best], torch.tensor(c), best)
    rows = torch.arange(b)
    ce_cls = -torch.log_softmax(cls_logits, dim=-1)[rows, labels].mean()
    ce_dist = -torch.log_softmax(dist_logits, dim=-1)[rows, best].mean()
    return 0.5 * ce_cls + 0.5 * ce_dist
'''),
    dict(exercise="hard_distillation_loss", diagnosis="Likely mistake: the log-probabilities are log(softmax(x))",
         mistake="log of softmax: -inf for large logits", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    y_t = teacher_logits.argmax(dim=-1)
    ce_cls = -torch.log(torch.softmax(cls_logits, dim=-1))[rows, labels].mean()
    ce_dist = -torch.log(torch.softmax(dist_logits, dim=-1))[rows, y_t].mean()
    return 0.5 * ce_cls + 0.5 * ce_dist
'''),
    dict(exercise="hard_distillation_loss", diagnosis="Likely mistake: the softmax exponentiates the raw logits",
         mistake="softmax by hand without subtracting the maximum: exp overflows", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    y_t = teacher_logits.argmax(dim=-1)
    def ce(z, y):
        e = torch.exp(z)
        return -torch.log(e[rows, y] / e.sum(dim=-1)).mean()
    return 0.5 * ce(cls_logits, labels) + 0.5 * ce(dist_logits, y_t)
'''),
    dict(exercise="hard_distillation_loss",
         diagnosis="Likely mistake: the teacher's logits were used as the distillation head's logits",
         mistake="the second term scores the teacher against its own argmax", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    y_t = teacher_logits.argmax(dim=-1)
    ce_cls = -torch.log_softmax(cls_logits, dim=-1)[rows, labels].mean()
    ce_dist = -torch.log_softmax(teacher_logits, dim=-1)[rows, y_t].mean()
    return 0.5 * ce_cls + 0.5 * ce_dist
'''),
    dict(exercise="hard_distillation_loss", diagnosis="does the exercise for you",
         mistake="F.cross_entropy, which the exercise asks to write", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    y_t = teacher_logits.argmax(dim=-1)
    return 0.5 * F.cross_entropy(cls_logits, labels) + 0.5 * F.cross_entropy(dist_logits, y_t)
'''),
    dict(exercise="hard_distillation_loss", diagnosis="the gradient with respect to input 3",
         mistake="a straight-through one-hot target that lets gradient into the teacher", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    p_t = torch.softmax(teacher_logits, dim=-1)
    hard = torch.zeros_like(p_t)
    hard[rows, p_t.argmax(dim=-1)] = 1.0
    target = hard + p_t - p_t.detach()          # the value is one-hot, the gradient is the softmax's
    ce_cls = -torch.log_softmax(cls_logits, dim=-1)[rows, labels].mean()
    ce_dist = -(target * torch.log_softmax(dist_logits, dim=-1)).sum(-1).mean()
    return 0.5 * ce_cls + 0.5 * ce_dist
'''),
    dict(exercise="hard_distillation_loss", diagnosis="returned shape",
         mistake="returns the per-image losses, (B,), not their mean", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    rows = torch.arange(labels.shape[0])
    y_t = teacher_logits.argmax(dim=-1)
    ce_cls = -torch.log_softmax(cls_logits, dim=-1)[rows, labels]
    ce_dist = -torch.log_softmax(dist_logits, dim=-1)[rows, y_t]
    return 0.5 * ce_cls + 0.5 * ce_dist
'''),
]

# Correct implementations written differently from the reference solution: each must keep full marks.
RIGHT = [
    # ------------------------------------------------------------ patchify
    dict(exercise="patchify", how="Tensor.unfold on the two spatial axes (sliding windows with stride = patch)",
         source='''
def patchify(images, patch):
    b, c = images.shape[:2]
    x = images.unfold(2, patch, patch).unfold(3, patch, patch)  # (B, C, gh, gw, P, P)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * patch * patch)
'''),
    dict(exercise="patchify", how="a loop over the grid, row by row, slices flattened and stacked", source='''
def patchify(images, patch):
    b, c, h, w = images.shape
    tokens = []
    for top in range(0, h, patch):
        for left in range(0, w, patch):
            tokens.append(images[:, :, top:top + patch, left:left + patch].reshape(b, -1))
    return torch.stack(tokens, dim=1)
'''),
    dict(exercise="patchify", how="the permutation written as an einsum", source='''
def patchify(images, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    return torch.einsum("bcipjq->bijcpq", x).reshape(b, -1, c * patch * patch)
'''),
    # ------------------------------------------------------------ patch_embed
    dict(exercise="patch_embed", how="one einsum over the patch grid and the kernel, no patchify", source='''
def patch_embed(images, weight, bias, patch):
    b, c, h, w = images.shape
    x = images.reshape(b, c, h // patch, patch, w // patch, patch)
    out = torch.einsum("bcipjq,dcpq->bijd", x, weight)
    return out.reshape(b, -1, weight.shape[0]) + bias
'''),
    dict(exercise="patch_embed", how="F.linear on the patches with the flattened kernel", source='''
def patch_embed(images, weight, bias, patch):
    return F.linear(patchify(images, patch), weight.flatten(1), bias)
'''),
    # ------------------------------------------------------------ prepend_cls_add_pos
    dict(exercise="prepend_cls_add_pos", how="positions added to CLS and to the patches separately, then concatenated",
         source='''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    b = patches.shape[0]
    cls = (cls_token + pos_embed[:, :1]).expand(b, -1, -1)
    return torch.cat([cls, patches + pos_embed[:, 1:]], dim=1)
'''),
    dict(exercise="prepend_cls_add_pos", how="a new tensor filled by slice assignment", source='''
def prepend_cls_add_pos(patches, cls_token, pos_embed):
    b, n, d = patches.shape
    out = patches.new_zeros(b, 1 + n, d)
    out[:, :1] = cls_token
    out[:, 1:] = patches
    return out + pos_embed
'''),
    # ------------------------------------------------------------ vit_forward
    dict(exercise="vit_forward",
         how="permute + reshape of the conv output, CLS and positions inlined, norm on the CLS token only", source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    feats = patch_proj(images)
    b, d = feats.shape[:2]
    tokens = feats.permute(0, 2, 3, 1).reshape(b, -1, d)
    tokens = torch.cat([cls_token.expand(b, 1, d), tokens], dim=1) + pos_embed
    for block in blocks:
        tokens = block(tokens)
    return head(norm(tokens[:, 0]))
'''),
    dict(exercise="vit_forward", how="the conv's weights through the learner's patch_embed, blocks as nn.Sequential",
         source='''
def vit_forward(images, patch_proj, cls_token, pos_embed, blocks, norm, head):
    tokens = patch_embed(images, patch_proj.weight, patch_proj.bias, patch_proj.kernel_size[0])
    tokens = torch.nn.Sequential(*blocks)(prepend_cls_add_pos(tokens, cls_token, pos_embed))
    return head(norm(tokens))[:, 0]
'''),
    # ------------------------------------------------------------ interpolate_pos_embed
    dict(exercise="interpolate_pos_embed",
         how="grid transposed to (D, N) first, unflatten / flatten instead of permutes", source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    grid = pos_embed[0, 1:].T.unflatten(1, tuple(old_grid))[None]      # (1, D, gh, gw)
    grid = F.interpolate(grid, size=tuple(new_grid), mode="bicubic", align_corners=False)
    return torch.cat([pos_embed[:, :1], grid.flatten(2).transpose(1, 2)], dim=1)
'''),
    dict(exercise="interpolate_pos_embed",
         how="bicubic written out: Keys cubic (a = -0.75) weight matrices per axis, applied with einsum", source='''
def interpolate_pos_embed(pos_embed, old_grid, new_grid):
    def cubic(t):
        a, t = -0.75, abs(t)
        if t <= 1:
            return ((a + 2) * t - (a + 3)) * t * t + 1
        if t < 2:
            return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return 0.0

    def weights(n_in, n_out):
        m = torch.zeros(n_out, n_in, dtype=pos_embed.dtype)
        for o in range(n_out):
            src = (o + 0.5) * n_in / n_out - 0.5   # align_corners=False, no clamp for cubic
            first = int(src // 1)
            frac = src - first
            for off in range(-1, 3):
                m[o, min(max(first + off, 0), n_in - 1)] += cubic(off - frac)
        return m

    (gh, gw), (nh, nw) = old_grid, new_grid
    d = pos_embed.shape[-1]
    grid = pos_embed[0, 1:].reshape(gh, gw, d)
    out = torch.einsum("yi,xj,ijd->yxd", weights(gh, nh), weights(gw, nw), grid)
    return torch.cat([pos_embed[:, :1], out.reshape(1, nh * nw, d)], dim=1)
'''),
    # ------------------------------------------------------------ prepend_cls_and_distillation_tokens
    dict(exercise="prepend_cls_and_distillation_tokens",
         how="positions added to each part separately, three concatenated pieces", source='''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    b = patches.shape[0]
    cls = (cls_token + pos_embed[:, 0:1]).expand(b, -1, -1)
    dist = (dist_token + pos_embed[:, 1:2]).expand(b, -1, -1)
    return torch.cat([cls, dist, patches + pos_embed[:, 2:]], dim=1)
'''),
    dict(exercise="prepend_cls_and_distillation_tokens",
         how="through the learner's own exercise 3, then the distillation token inserted", source='''
def prepend_cls_and_distillation_tokens(patches, cls_token, dist_token, pos_embed):
    with_cls = prepend_cls_add_pos(patches, cls_token, torch.cat([pos_embed[:, :1], pos_embed[:, 2:]], dim=1))
    dist = (dist_token + pos_embed[:, 1:2]).expand(patches.shape[0], -1, -1)
    return torch.cat([with_cls[:, :1], dist, with_cls[:, 1:]], dim=1)
'''),
    # ------------------------------------------------------------ hard_distillation_loss
    dict(exercise="hard_distillation_loss", how="logsumexp minus the target's logit, picked with gather", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    def ce(z, y):
        picked = z.gather(1, y.unsqueeze(1)).squeeze(1)
        return (torch.logsumexp(z, dim=1) - picked).mean()
    return 0.5 * (ce(cls_logits, labels) + ce(dist_logits, torch.argmax(teacher_logits, dim=1)))
'''),
    dict(exercise="hard_distillation_loss",
         how="one-hot targets and a stable log-softmax written out with the row maximum", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    k = cls_logits.shape[-1]
    def log_softmax(z):
        shifted = z - z.max(dim=-1, keepdim=True).values
        return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
    y_t = torch.nn.functional.one_hot(teacher_logits.argmax(-1), k).to(cls_logits.dtype)
    y = torch.nn.functional.one_hot(labels.long(), k).to(cls_logits.dtype)  # one_hot takes int64 only
    per_image = -(y * log_softmax(cls_logits)).sum(-1) - (y_t * log_softmax(dist_logits)).sum(-1)
    return per_image.mean() / 2
'''),
    dict(exercise="hard_distillation_loss", how="both heads stacked into one batch of 2B rows, one cross-entropy",
         source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    z = torch.cat([cls_logits, dist_logits], dim=0)
    y = torch.cat([labels, teacher_logits.max(dim=-1).indices])
    logp = z - torch.logsumexp(z, dim=-1, keepdim=True)
    return -logp[torch.arange(z.shape[0]), y].mean()
'''),
    # labels are int64, as the exercise says (issue 45): F.one_hot, which takes int64 only, is right
    dict(exercise="hard_distillation_loss", how="one-hot labels with F.one_hot on the int64 labels, log-softmax "
         "written out", source='''
def hard_distillation_loss(cls_logits, dist_logits, teacher_logits, labels):
    k = cls_logits.shape[-1]
    def log_softmax(z):
        shifted = z - z.max(dim=-1, keepdim=True).values
        return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()
    y_t = torch.nn.functional.one_hot(teacher_logits.argmax(-1), k).to(cls_logits.dtype)
    y = torch.nn.functional.one_hot(labels, k).to(cls_logits.dtype)
    per_image = -(y * log_softmax(cls_logits)).sum(-1) - (y_t * log_softmax(dist_logits)).sum(-1)
    return per_image.mean() / 2
'''),
]


# ------------------------------------------------------------ predicted_patch_shape (predict, then run)
WRONG += [
    dict(exercise='predicted_patch_shape', diagnosis='Likely mistake: the last two axes are swapped: each row ',
         mistake='the last two axes are swapped: each row is one patch, of C * P * P numbers', source='''
def predicted_patch_shape():
    return [5, 4, 15]
'''),
    dict(exercise='predicted_patch_shape', diagnosis='Likely mistake: the grid of patches was kept as two axes',
         mistake='the grid of patches was kept as two axes', source='''
def predicted_patch_shape():
    return [5, 3, 5, 4]
'''),
    dict(exercise='predicted_patch_shape', diagnosis='Likely mistake: the patches were counted over the batch',
         mistake='the patches were counted over the batch', source='''
def predicted_patch_shape():
    return [1, 75, 4]
'''),
    dict(exercise='predicted_patch_shape', diagnosis="should return", mistake="answers in words", source='''
def predicted_patch_shape():
    return "I think it is (5, 15, 4)"
'''),
    dict(exercise='predicted_patch_shape', diagnosis="Did you forget to `return` it?",
         mistake="prints the prediction", source='''
def predicted_patch_shape():
    print((5, 15, 4))
'''),
]
RIGHT += [
    dict(exercise='predicted_patch_shape', how="a tensor", source='''
def predicted_patch_shape():
    return torch.tensor([5.0, 15.0, 4.0])
'''),
    dict(exercise='predicted_patch_shape', how="a tuple of the exact values", source='''
def predicted_patch_shape():
    return (5, 15, 4)
'''),
]
