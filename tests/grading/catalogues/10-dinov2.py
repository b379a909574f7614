"""Plausible wrong implementations for assignment 10-dinov2, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/10-dinov2/dinov2.ipynb with ``source``; the hidden tests of that
exercise must fail on it (tests/grading/test_catalogues.py). ``mistake`` says what a
learner got wrong, in the words of a reviewer.
"""

WRONG = [
    # ------------------------------------------------------------ add_registers
    dict(exercise="add_registers", diagnosis="Likely mistake: the registers come before",
         mistake="puts the registers before CLS", source='''
def add_registers(patches, cls_token, registers, pos_embed):
    b = patches.shape[0]
    x = torch.cat([cls_token.expand(b, -1, -1), patches], dim=1) + pos_embed
    return torch.cat([registers.expand(b, -1, -1), x], dim=1)
'''),
    dict(exercise="add_registers", diagnosis="Likely mistake: the registers come after the",
         mistake="appends the registers after the patches", source='''
def add_registers(patches, cls_token, registers, pos_embed):
    b = patches.shape[0]
    x = torch.cat([cls_token.expand(b, -1, -1), patches], dim=1) + pos_embed
    return torch.cat([x, registers.expand(b, -1, -1)], dim=1)
'''),
    dict(exercise="add_registers", diagnosis="Likely mistake: CLS got no position: pos_embed[:,",
         mistake="adds positions to the patches only, none to CLS", source='''
def add_registers(patches, cls_token, registers, pos_embed):
    b = patches.shape[0]
    return torch.cat([cls_token.expand(b, -1, -1), registers.expand(b, -1, -1), patches + pos_embed[:, 1:]], dim=1)
'''),
    dict(exercise="add_registers", diagnosis="Likely mistake: the patches got the positions",
         mistake="gives the patches positions 0..N-1", source='''
def add_registers(patches, cls_token, registers, pos_embed):
    b = patches.shape[0]
    n = patches.shape[1]
    return torch.cat([cls_token.expand(b, -1, -1) + pos_embed[:, :1], registers.expand(b, -1, -1),
                      patches + pos_embed[:, :n]], dim=1)
'''),
    dict(exercise="add_registers", diagnosis="Likely mistake: the registers got CLS's position:",
         mistake="gives the registers CLS's position", source='''
def add_registers(patches, cls_token, registers, pos_embed):
    b = patches.shape[0]
    x = torch.cat([cls_token.expand(b, -1, -1), patches], dim=1) + pos_embed
    return torch.cat([x[:, :1], registers.expand(b, -1, -1) + pos_embed[:, :1], x[:, 1:]], dim=1)
'''),
    dict(exercise="add_registers", diagnosis="Likely mistake: the registers are missing",
         mistake="forgets the registers", source='''
def add_registers(patches, cls_token, registers, pos_embed):
    b = patches.shape[0]
    return torch.cat([cls_token.expand(b, -1, -1), patches], dim=1) + pos_embed
'''),
    dict(exercise="add_registers", diagnosis="Likely mistake: CLS is missing from the sequence.",
         mistake="only handles one register (registers[:, :1])", source='''
def add_registers(patches, cls_token, registers, pos_embed):
    b = patches.shape[0]
    x = torch.cat([cls_token.expand(b, -1, -1), patches], dim=1) + pos_embed
    return torch.cat([x[:, :1], registers[:, :1].expand(b, -1, -1), x[:, 1:]], dim=1)
'''),
    dict(exercise="add_registers", diagnosis="Likely mistake: no positions were added.", mistake="forgets pos_embed",
         source='''
def add_registers(patches, cls_token, registers, pos_embed):
    b = patches.shape[0]
    return torch.cat([cls_token.expand(b, -1, -1), registers.expand(b, -1, -1), patches], dim=1)
'''),
    dict(exercise="add_registers", diagnosis="raised", mistake="writes CLS into the first patch in place", source='''
def add_registers(patches, cls_token, registers, pos_embed):
    b = patches.shape[0]
    patches += pos_embed[:, 1:]
    cls = cls_token.expand(b, -1, -1) + pos_embed[:, :1]
    return torch.cat([cls, registers.expand(b, -1, -1), patches], dim=1)
'''),
    # ------------------------------------------------------------ layerscale_block
    dict(exercise="layerscale_block", diagnosis="Likely mistake: gamma1 and gamma2 are swapped:",
         mistake="swaps gamma1 and gamma2", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    h = x + gamma2 * attn(norm1(x))
    return h + gamma1 * mlp(norm2(h))
'''),
    dict(exercise="layerscale_block", diagnosis="Likely mistake: the gamma scales the skip",
         mistake="scales the whole residual sum", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    h = gamma1 * (x + attn(norm1(x)))
    return gamma2 * (h + mlp(norm2(h)))
'''),
    dict(exercise="layerscale_block", diagnosis="Likely mistake: the gamma scales the branch's",
         mistake="scales the sublayer input instead of its output", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    h = x + attn(gamma1 * norm1(x))
    return h + mlp(gamma2 * norm2(h))
'''),
    dict(exercise="layerscale_block", diagnosis="Likely mistake: only the attention branch", mistake="forgets gamma2",
         source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    h = x + gamma1 * attn(norm1(x))
    return h + mlp(norm2(h))
'''),
    dict(exercise="layerscale_block", diagnosis="Likely mistake: only the MLP branch is scaled:",
         mistake="forgets gamma1", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    h = x + attn(norm1(x))
    return h + gamma2 * mlp(norm2(h))
'''),
    dict(exercise="layerscale_block", diagnosis="Likely mistake: the gammas are not used at all.",
         mistake="a plain pre-LN block, no LayerScale", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    h = x + attn(norm1(x))
    return h + mlp(norm2(h))
'''),
    dict(exercise="layerscale_block", diagnosis="Likely mistake: the norms are swapped: norm1 goes",
         mistake="norm2 before attn, norm1 before mlp", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    h = x + gamma1 * attn(norm2(x))
    return h + gamma2 * mlp(norm1(h))
'''),
    dict(exercise="layerscale_block", diagnosis="Likely mistake: the skip is missing: the block",
         mistake="no residual connections", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    h = gamma1 * attn(norm1(x))
    return gamma2 * mlp(norm2(h))
'''),
    dict(exercise="layerscale_block", diagnosis="Likely mistake: the MLP reads x instead of",
         mistake="parallel branches on x", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    return x + gamma1 * attn(norm1(x)) + gamma2 * mlp(norm2(x))
'''),
    dict(exercise="layerscale_block", diagnosis="First divergence", mistake="post-LN with LayerScale", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    h = norm1(x + gamma1 * attn(x))
    return norm2(h + gamma2 * mlp(h))
'''),
    dict(exercise="layerscale_block", diagnosis="First divergence",
         mistake="uses the gammas as a matrix (gamma outer product)", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    h = x + attn(norm1(x)) * gamma1.sum()
    return h + mlp(norm2(h)) * gamma2.sum()
'''),
    dict(exercise="layerscale_block", diagnosis="raised", mistake="updates x in place", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    x += gamma1 * attn(norm1(x))
    x += gamma2 * mlp(norm2(x))
    return x
'''),
    # ------------------------------------------------------------ multi_crop
    dict(exercise="multi_crop", diagnosis="Likely mistake: the box was read as (left,",
         mistake="reads the box as (left, top, width, height)", source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def cut(boxes, size):
        out = []
        for img, (left, top, w, h) in zip(images, boxes.tolist()):
            crop = img[:, top:top + h, left:left + w]
            out.append(F.interpolate(crop[None], size=(size, size), mode="bilinear", align_corners=False)[0])
        return torch.stack(out)
    return [cut(b, global_size) for b in global_boxes] + [cut(b, local_size) for b in local_boxes]
'''),
    dict(exercise="multi_crop", diagnosis="Likely mistake: a box is (top, left, height, width): top is the row",
         mistake="reads the box as (left, top, height, width)", source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def cut(boxes, size):
        out = []
        for img, (x0, y0, h, w) in zip(images, boxes.tolist()):
            crop = img[:, y0:y0 + h, x0:x0 + w]
            out.append(F.interpolate(crop[None], size=(size, size), mode="bilinear", align_corners=False)[0])
        return torch.stack(out)
    return [cut(b, global_size) for b in global_boxes] + [cut(b, local_size) for b in local_boxes]
'''),
    dict(exercise="multi_crop", diagnosis="Likely mistake: height and width are swapped:",
         mistake="slices height along the columns", source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def cut(boxes, size):
        out = []
        for img, (top, left, h, w) in zip(images, boxes.tolist()):
            crop = img[:, top:top + w, left:left + h]
            out.append(F.interpolate(crop[None], size=(size, size), mode="bilinear", align_corners=False)[0])
        return torch.stack(out)
    return [cut(b, global_size) for b in global_boxes] + [cut(b, local_size) for b in local_boxes]
'''),
    dict(exercise="multi_crop", diagnosis="Likely mistake: the crop is one pixel too",
         mistake="inclusive end: one pixel too many", source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def cut(boxes, size):
        out = []
        for img, (top, left, h, w) in zip(images, boxes.tolist()):
            crop = img[:, top:top + h + 1, left:left + w + 1]
            out.append(F.interpolate(crop[None], size=(size, size), mode="bilinear", align_corners=False)[0])
        return torch.stack(out)
    return [cut(b, global_size) for b in global_boxes] + [cut(b, local_size) for b in local_boxes]
'''),
    dict(exercise="multi_crop", diagnosis="Likely mistake: the resize uses align_corners=True:",
         mistake="align_corners=True", source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def cut(boxes, size):
        out = []
        for img, (top, left, h, w) in zip(images, boxes.tolist()):
            crop = img[:, top:top + h, left:left + w]
            out.append(F.interpolate(crop[None], size=(size, size), mode="bilinear", align_corners=True)[0])
        return torch.stack(out)
    return [cut(b, global_size) for b in global_boxes] + [cut(b, local_size) for b in local_boxes]
'''),
    dict(exercise="multi_crop", diagnosis="Likely mistake: the resize uses nearest-neighbour",
         mistake="default interpolation mode (nearest)", source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def cut(boxes, size):
        out = []
        for img, (top, left, h, w) in zip(images, boxes.tolist()):
            crop = img[:, top:top + h, left:left + w]
            out.append(F.interpolate(crop[None], size=(size, size))[0])
        return torch.stack(out)
    return [cut(b, global_size) for b in global_boxes] + [cut(b, local_size) for b in local_boxes]
'''),
    dict(exercise="multi_crop", diagnosis="Likely mistake: the local crops come first:", mistake="local crops first",
         source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def cut(boxes, size):
        out = []
        for img, (top, left, h, w) in zip(images, boxes.tolist()):
            crop = img[:, top:top + h, left:left + w]
            out.append(F.interpolate(crop[None], size=(size, size), mode="bilinear", align_corners=False)[0])
        return torch.stack(out)
    return [cut(b, local_size) for b in local_boxes] + [cut(b, global_size) for b in global_boxes]
'''),
    dict(exercise="multi_crop", diagnosis="Likely mistake: every image was cut with the",
         mistake="uses the first image's box for the whole batch", source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def cut(boxes, size):
        top, left, h, w = boxes[0].tolist()
        crop = images[:, :, top:top + h, left:left + w]
        return F.interpolate(crop, size=(size, size), mode="bilinear", align_corners=False)
    return [cut(b, global_size) for b in global_boxes] + [cut(b, local_size) for b in local_boxes]
'''),
    dict(exercise="multi_crop", diagnosis="Likely mistake: every crop is resized to the",
         mistake="resizes every crop to global_size", source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def cut(boxes, size):
        out = []
        for img, (top, left, h, w) in zip(images, boxes.tolist()):
            crop = img[:, top:top + h, left:left + w]
            out.append(F.interpolate(crop[None], size=(size, size), mode="bilinear", align_corners=False)[0])
        return torch.stack(out)
    return [cut(b, global_size) for b in list(global_boxes) + list(local_boxes)]
'''),
    dict(exercise="multi_crop", diagnosis="Likely mistake: the resize is antialiased:", mistake="antialiased resize",
         source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def cut(boxes, size):
        out = []
        for img, (top, left, h, w) in zip(images, boxes.tolist()):
            crop = img[:, top:top + h, left:left + w]
            out.append(F.interpolate(crop[None], size=(size, size), mode="bilinear", align_corners=False,
                                     antialias=True)[0])
        return torch.stack(out)
    return [cut(b, global_size) for b in global_boxes] + [cut(b, local_size) for b in local_boxes]
'''),
    # ------------------------------------------------------------ dino_loss
    dict(exercise="dino_loss", diagnosis="Likely mistake: pairs of the same view are",
         mistake="keeps the same-view pairs", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_t = torch.softmax((teacher_out.detach() - center.detach()) / teacher_temp, dim=-1)
    log_p_s = torch.log_softmax(student_out / student_temp, dim=-1)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce.mean()
'''),
    dict(exercise="dino_loss", diagnosis="Likely mistake: the center is not subtracted", mistake="no centering",
         source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_t = torch.softmax(teacher_out.detach() / teacher_temp, dim=-1)
    log_p_s = torch.log_softmax(student_out / student_temp, dim=-1)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss", diagnosis="Likely mistake: the temperatures are swapped:",
         mistake="swaps the temperatures", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_t = torch.softmax((teacher_out.detach() - center.detach()) / student_temp, dim=-1)
    log_p_s = torch.log_softmax(student_out / teacher_temp, dim=-1)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss", diagnosis="gradient with respect to", mistake="forgets to detach the teacher", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_t = torch.softmax((teacher_out - center) / teacher_temp, dim=-1)
    log_p_s = torch.log_softmax(student_out / student_temp, dim=-1)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss", diagnosis="Likely mistake: the average divides by all",
         mistake="loops over crops with a python sum and divides by n_t * n_s", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    total = 0.0
    for i, t in enumerate(teacher_out):
        p_t = torch.softmax((t.detach() - center.detach()) / teacher_temp, dim=-1)
        for j, s in enumerate(student_out):
            if i == j:
                continue
            total = total + (-(p_t * torch.log_softmax(s / student_temp, dim=-1)).sum(-1).mean())
    return total / (len(teacher_out) * len(student_out))
'''),
    dict(exercise="dino_loss", diagnosis="Likely mistake: the teacher's softmax runs",
         mistake="softmax over the batch axis for the teacher", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_t = torch.softmax((teacher_out.detach() - center.detach()) / teacher_temp, dim=1)
    log_p_s = torch.log_softmax(student_out / student_temp, dim=-1)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss", diagnosis="Likely mistake: the cross-entropy is summed", mistake="sums over the batch",
         source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_t = torch.softmax((teacher_out.detach() - center.detach()) / teacher_temp, dim=-1)
    log_p_s = torch.log_softmax(student_out / student_temp, dim=-1)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s)
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss",
         diagnosis="Likely mistake: teacher and student are swapped "
                   "(softmax of the student, log-softmax of the centered",
         mistake="KL direction reversed (student as target)", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_s = torch.softmax(student_out / student_temp, dim=-1)
    log_p_t = torch.log_softmax((teacher_out.detach() - center.detach()) / teacher_temp, dim=-1)
    ce = -torch.einsum("sbk,tbk->ts", p_s, log_p_t) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss", diagnosis="Likely mistake: the center is subtracted from",
         mistake="centers the student too", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_t = torch.softmax((teacher_out.detach() - center.detach()) / teacher_temp, dim=-1)
    log_p_s = torch.log_softmax((student_out - center) / student_temp, dim=-1)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss", diagnosis="Likely mistake: the center is added to the teacher's output",
         mistake="adds the center instead of subtracting it", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_t = torch.softmax((teacher_out.detach() + center.detach()) / teacher_temp, dim=-1)
    log_p_s = torch.log_softmax(student_out / student_temp, dim=-1)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss", diagnosis="Likely mistake: the teacher's temperature is missing:",
         mistake="no teacher temperature (no sharpening)", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_t = torch.softmax(teacher_out.detach() - center.detach(), dim=-1)
    log_p_s = torch.log_softmax(student_out / student_temp, dim=-1)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss", diagnosis="Likely mistake: the student's temperature is missing:",
         mistake="no student temperature", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_t = torch.softmax((teacher_out.detach() - center.detach()) / teacher_temp, dim=-1)
    log_p_s = torch.log_softmax(student_out, dim=-1)
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss",
         diagnosis="Likely mistake: teacher and student are swapped "
                   "(softmax of the student, log-softmax of the teacher)",
         mistake="student as the target, teacher not centered", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_s = torch.softmax(student_out / student_temp, dim=-1)
    log_p_t = torch.log_softmax(teacher_out.detach() / teacher_temp, dim=-1)
    ce = -torch.einsum("sbk,tbk->ts", p_s, log_p_t) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss", diagnosis="Likely mistake: the teacher's crops were matched with the last",
         mistake="skips teacher i with student n_s - n_t + i (globals taken as the last crops)", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    n_t, n_s = teacher_out.shape[0], student_out.shape[0]
    total, pairs = 0.0, 0
    for i in range(n_t):
        p_t = torch.softmax((teacher_out[i].detach() - center.detach()) / teacher_temp, dim=-1)
        for j in range(n_s):
            if j == n_s - n_t + i:
                continue
            log_p_s = torch.log_softmax(student_out[j] / student_temp, dim=-1)
            total = total - (p_t * log_p_s).sum(-1).mean()
            pairs += 1
    return total / pairs
'''),
    dict(exercise="dino_loss", diagnosis="Likely mistake: the sign is flipped: the cross-entropy",
         mistake="forgets the minus sign of the cross-entropy", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    p_t = torch.softmax((teacher_out.detach() - center.detach()) / teacher_temp, dim=-1)
    log_p_s = torch.log_softmax(student_out / student_temp, dim=-1)
    ce = torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    dict(exercise="dino_loss", diagnosis="contains NaN",
         mistake="uses log of softmax with a plain exp (overflows at low temperature)", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    e = torch.exp((teacher_out.detach() - center.detach()) / teacher_temp)
    p_t = e / e.sum(-1, keepdim=True)
    es = torch.exp(student_out / student_temp)
    log_p_s = torch.log(es / es.sum(-1, keepdim=True))
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    return ce[~torch.eye(*ce.shape, dtype=torch.bool)].mean()
'''),
    # ------------------------------------------------------------ update_center
    dict(exercise="update_center", diagnosis="Likely mistake: momentum is on the wrong term:",
         mistake="momentum on the wrong term", source='''
def update_center(center, teacher_out, momentum):
    batch_mean = teacher_out.reshape(-1, teacher_out.shape[-1]).mean(dim=0).reshape(center.shape)
    return (1 - momentum) * center + momentum * batch_mean
'''),
    dict(exercise="update_center", diagnosis="Likely mistake: only the first crop was averaged:",
         mistake="averages the first crop only", source='''
def update_center(center, teacher_out, momentum):
    return momentum * center + (1 - momentum) * teacher_out[0].mean(dim=0).reshape(center.shape)
'''),
    dict(exercise="update_center", diagnosis="Likely mistake: the mean runs over the prototypes",
         mistake="averages over the prototype axis", source='''
def update_center(center, teacher_out, momentum):
    return momentum * center + (1 - momentum) * teacher_out.mean(dim=-1).mean()
'''),
    dict(exercise="update_center", diagnosis="Likely mistake: the center was replaced by the batch mean:",
         mistake="returns the batch mean (no moving average)", source='''
def update_center(center, teacher_out, momentum):
    return teacher_out.mean(dim=(0, 1)).reshape(center.shape)
'''),
    dict(exercise="update_center", diagnosis="Likely mistake: the batch mean is subtracted: new =",
         mistake="subtracts the batch mean", source='''
def update_center(center, teacher_out, momentum):
    batch_mean = teacher_out.reshape(-1, teacher_out.shape[-1]).mean(dim=0).reshape(center.shape)
    return momentum * center - (1 - momentum) * batch_mean
'''),
    dict(exercise="update_center", diagnosis="modified one of its inputs in place",
         mistake="updates the center in place", source='''
def update_center(center, teacher_out, momentum):
    batch_mean = teacher_out.reshape(-1, teacher_out.shape[-1]).mean(dim=0).reshape(center.shape)
    center.mul_(momentum).add_((1 - momentum) * batch_mean)
    return center
'''),
    dict(exercise="update_center", diagnosis="returned shape", mistake="returns (K,) for a (1, K) center", source='''
def update_center(center, teacher_out, momentum):
    batch_mean = teacher_out.mean(dim=(0, 1))
    return momentum * center.reshape(-1) + (1 - momentum) * batch_mean
'''),
    dict(exercise="update_center", diagnosis="Likely mistake: the teacher outputs are summed:",
         mistake="sums instead of averaging", source='''
def update_center(center, teacher_out, momentum):
    batch_sum = teacher_out.sum(dim=(0, 1)).reshape(center.shape)
    return momentum * center + (1 - momentum) * batch_sum
'''),
    # ------------------------------------------------------------ ema_update
    dict(exercise="ema_update", diagnosis="Likely mistake: momentum is on the wrong term:",
         mistake="momentum on the wrong term", source='''
def ema_update(teacher, student, momentum):
    with torch.no_grad():
        for p_t, p_s in zip(teacher.parameters(), student.parameters()):
            p_t.mul_(1 - momentum).add_(p_s, alpha=momentum)
'''),
    dict(exercise="ema_update", diagnosis="Likely mistake: the teacher's parameters did",
         mistake="rebinds the loop variable, nothing changes", source='''
def ema_update(teacher, student, momentum):
    with torch.no_grad():
        for p_t, p_s in zip(teacher.parameters(), student.parameters()):
            p_t = momentum * p_t + (1 - momentum) * p_s
'''),
    dict(exercise="ema_update", diagnosis="raised", mistake="forgets torch.no_grad", source='''
def ema_update(teacher, student, momentum):
    for p_t, p_s in zip(teacher.parameters(), student.parameters()):
        p_t.mul_(momentum).add_(p_s.detach(), alpha=1 - momentum)
'''),
    dict(exercise="ema_update", diagnosis="gives a wrong result",
         mistake="returns a new state dict instead of updating", source='''
def ema_update(teacher, student, momentum):
    s = student.state_dict()
    return {k: momentum * v + (1 - momentum) * s[k] for k, v in teacher.state_dict().items()}
'''),
    dict(exercise="ema_update", diagnosis="Likely mistake: the student was moved towards",
         mistake="updates the student towards the teacher", source='''
def ema_update(teacher, student, momentum):
    with torch.no_grad():
        for p_t, p_s in zip(teacher.parameters(), student.parameters()):
            p_s.mul_(momentum).add_(p_t, alpha=1 - momentum)
'''),
    dict(exercise="ema_update", diagnosis="Likely mistake: the teacher became a copy",
         mistake="loads the student's weights (copy, no average)", source='''
def ema_update(teacher, student, momentum):
    teacher.load_state_dict(student.state_dict())
'''),
    dict(exercise="ema_update", diagnosis="Likely mistake: the function returned something:",
         mistake="returns the teacher", source='''
def ema_update(teacher, student, momentum):
    with torch.no_grad():
        for p_t, p_s in zip(teacher.parameters(), student.parameters()):
            p_t.mul_(momentum).add_(p_s, alpha=1 - momentum)
    return teacher
'''),
    dict(exercise="ema_update", diagnosis="Likely mistake: only the weights were updated:",
         mistake="updates only the weights, not the biases", source='''
def ema_update(teacher, student, momentum):
    with torch.no_grad():
        for (n, p_t), p_s in zip(teacher.named_parameters(), student.parameters()):
            if n.endswith("weight"):
                p_t.mul_(momentum).add_(p_s, alpha=1 - momentum)
'''),
    # numerically naive: right on moderate inputs, wrong where the chapter warns (exp overflows)
    dict(exercise="dino_loss", diagnosis="contains NaN",
         mistake="softmax and log-softmax written out without the maximum subtracted", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    e_t = torch.exp((teacher_out.detach() - center.detach()) / teacher_temp)
    p_t = e_t / e_t.sum(-1, keepdim=True)
    s = student_out / student_temp
    log_p_s = s - torch.log(torch.exp(s).sum(-1, keepdim=True))
    ce = -torch.einsum("tbk,sbk->ts", p_t, log_p_s) / student_out.shape[1]
    n_t, n_s = ce.shape
    return ce[~torch.eye(n_t, n_s, dtype=torch.bool)].mean()
'''),
    dict(exercise="ema_update", mistake="averages the whole state_dict, buffers included",
         diagnosis="Likely mistake: the teacher's buffers (BatchNorm's running statistics) were averaged too",
         source='''
def ema_update(teacher, student, momentum):
    with torch.no_grad():
        for t, s in zip(teacher.state_dict().values(), student.state_dict().values()):
            if t.is_floating_point():
                t.mul_(momentum).add_(s, alpha=1 - momentum)
'''),
]


# Correct implementations written differently from the reference solution: each must keep full marks.
RIGHT = [
    # ------------------------------------------------------------ add_registers
    dict(exercise="add_registers", how="positions added to CLS and to the patches separately, one concatenation",
         source='''
def add_registers(patches, cls_token, registers, pos_embed):
    b = patches.shape[0]
    cls = (cls_token + pos_embed[:, :1]).expand(b, -1, -1)
    return torch.cat([cls, registers.expand(b, -1, -1), patches + pos_embed[:, 1:]], dim=1)
'''),
    dict(exercise="add_registers", how="a position tensor with zeros at the registers, added to the whole sequence",
         source='''
def add_registers(patches, cls_token, registers, pos_embed):
    b = patches.shape[0]
    pos = torch.cat([pos_embed[:, :1], torch.zeros_like(registers), pos_embed[:, 1:]], dim=1)
    tokens = torch.cat([cls_token.expand(b, -1, -1), registers.expand(b, -1, -1), patches], dim=1)
    return tokens + pos
'''),
    # ------------------------------------------------------------ layerscale_block
    dict(exercise="layerscale_block", how="a loop over the (norm, sublayer, gamma) triples", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    for norm, sublayer, gamma in ((norm1, attn, gamma1), (norm2, mlp, gamma2)):
        x = x + gamma * sublayer(norm(x))
    return x
'''),
    dict(exercise="layerscale_block", how="torch.addcmul for each scaled residual", source='''
def layerscale_block(x, attn, mlp, norm1, norm2, gamma1, gamma2):
    h = torch.addcmul(x, gamma1, attn(norm1(x)))
    return torch.addcmul(h, gamma2, mlp(norm2(h)))
'''),
    # ------------------------------------------------------------ multi_crop
    dict(exercise="multi_crop", how="one loop over both box lists, 4-D slices resized and concatenated", source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    views = []
    for boxes, size in ((global_boxes, global_size), (local_boxes, local_size)):
        for crop_boxes in boxes:
            parts = []
            for i in range(images.shape[0]):
                top, left, h, w = (int(t) for t in crop_boxes[i])
                crop = images[i:i + 1, :, top:top + h, left:left + w]
                parts.append(F.interpolate(crop, size=(size, size), mode="bilinear", align_corners=False))
            views.append(torch.cat(parts, dim=0))
    return views
'''),
    dict(exercise="multi_crop", how="bilinear resizing written out as two interpolation matrices (half-pixel centres)",
         source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def resize_matrix(n_in, n_out):
        m = torch.zeros(n_out, n_in, dtype=images.dtype)
        for o in range(n_out):
            src = max((o + 0.5) * n_in / n_out - 0.5, 0.0)
            i0 = min(int(src), n_in - 1)
            i1 = min(i0 + 1, n_in - 1)
            frac = src - i0
            m[o, i0] += 1 - frac
            m[o, i1] += frac
        return m

    def cut(boxes, size):
        out = []
        for img, (top, left, h, w) in zip(images, boxes.tolist()):
            crop = img[:, top:top + h, left:left + w]
            out.append(resize_matrix(h, size) @ crop @ resize_matrix(w, size).T)
        return torch.stack(out)

    return [cut(b, global_size) for b in global_boxes] + [cut(b, local_size) for b in local_boxes]
'''),
    # ------------------------------------------------------------ dino_loss
    dict(exercise="dino_loss", how="an explicit loop over the pairs (i != j), log-softmax as s - logsumexp", source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    t = ((teacher_out - center) / teacher_temp).detach()
    p_t = torch.exp(t - torch.logsumexp(t, dim=-1, keepdim=True))
    s = student_out / student_temp
    log_p_s = s - torch.logsumexp(s, dim=-1, keepdim=True)
    total, pairs = 0.0, 0
    for i in range(teacher_out.shape[0]):
        for j in range(student_out.shape[0]):
            if i != j:
                total = total + (-(p_t[i] * log_p_s[j]).sum(dim=-1)).mean()
                pairs += 1
    return total / pairs
'''),
    dict(exercise="dino_loss", how="teacher under torch.no_grad, all pairs by broadcasting, the diagonal subtracted",
         source='''
def dino_loss(student_out, teacher_out, center, student_temp, teacher_temp):
    with torch.no_grad():
        p_t = F.softmax((teacher_out - center) / teacher_temp, dim=-1)
    log_p_s = F.log_softmax(student_out / student_temp, dim=-1)
    ce = -(p_t[:, None] * log_p_s[None]).sum(dim=-1).mean(dim=-1)   # (n_t, n_s)
    n_t, n_s = ce.shape
    return (ce.sum() - ce.diagonal().sum()) / (n_t * n_s - n_t)
'''),
    # ------------------------------------------------------------ update_center
    dict(exercise="update_center", how="mean over dims (0, 1), then torch.lerp", source='''
def update_center(center, teacher_out, momentum):
    batch_mean = teacher_out.mean(dim=(0, 1)).reshape(center.shape)
    return torch.lerp(batch_mean, center, momentum)
'''),
    dict(exercise="update_center", how="sum divided by the count, written as center + (1 - m) * (mean - center)",
         source='''
def update_center(center, teacher_out, momentum):
    batch_mean = teacher_out.sum(dim=(0, 1)) / (teacher_out.shape[0] * teacher_out.shape[1])
    return center + (1 - momentum) * (batch_mean - center)
'''),
    # ------------------------------------------------------------ ema_update
    dict(exercise="ema_update", how="Tensor.lerp_ towards the student under torch.no_grad", source='''
def ema_update(teacher, student, momentum):
    with torch.no_grad():
        for p_t, p_s in zip(teacher.parameters(), student.parameters()):
            p_t.lerp_(p_s, 1 - momentum)
'''),
    dict(exercise="ema_update", how="copy_ of the explicit average into .data, over named parameters", source='''
def ema_update(teacher, student, momentum):
    student_params = dict(student.named_parameters())
    for name, p_t in teacher.named_parameters():
        p_t.data.copy_(momentum * p_t.data + (1 - momentum) * student_params[name].data)
'''),
]

# The contract's last gaps (issue 27): the type of the returned container.
WRONG += [
    dict(exercise="multi_crop", diagnosis="the result is a tuple where a list is expected",
         mistake="returns the crops as a tuple", source='''
def multi_crop(images, global_boxes, local_boxes, global_size, local_size):
    def cut(boxes, size):
        out = []
        for img, (top, left, h, w) in zip(images, boxes.tolist()):
            crop = img[:, top:top + h, left:left + w]
            out.append(F.interpolate(crop[None], size=(size, size), mode="bilinear", align_corners=False)[0])
        return torch.stack(out)
    return tuple(cut(b, global_size) for b in global_boxes) + tuple(cut(b, local_size) for b in local_boxes)
'''),
]


# ------------------------------------------------------------ predicted_center (predict, then run)
WRONG += [
    dict(exercise='predicted_center', diagnosis='Likely mistake: the momentum weighs the new mean',
         mistake='the momentum weighs the new mean', source='''
def predicted_center():
    return [1.75, 3.0]
'''),
    dict(exercise='predicted_center', diagnosis="Likely mistake: the crops' outputs were summed",
         mistake="the crops' outputs were summed", source='''
def predicted_center():
    return [3.5, 2.0]
'''),
    dict(exercise='predicted_center', diagnosis='Likely mistake: only the first crop was used',
         mistake='only the first crop was used', source='''
def predicted_center():
    return [3.0, 0.5]
'''),
    dict(exercise='predicted_center', diagnosis="should return", mistake="answers in words", source='''
def predicted_center():
    return "I think it is [3.25, 1.0]"
'''),
    dict(exercise='predicted_center', diagnosis="Did you forget to `return` it?",
         mistake="prints the prediction", source='''
def predicted_center():
    print([3.25, 1.0])
'''),
]
RIGHT += [
    dict(exercise='predicted_center', how="a tensor", source='''
def predicted_center():
    return torch.tensor([3.25, 1.0])
'''),
    dict(exercise='predicted_center', how="a tuple of the exact values", source='''
def predicted_center():
    return (3.25, 1.0)
'''),
]
