"""Plausible wrong implementations for the ViT capstone, 11x-capstone-vit, as data.

Each entry replaces the solution cell ``exercise`` of
solutions/11x-capstone-vit/capstone_vit.ipynb with ``source``; the hidden tests
of that exercise must fail on it (tests/grading/test_catalogues.py).
``mistake`` says what a learner got wrong, in the words of a reviewer. The
recipe's entries (``train_vit``) train for real, as grading does: each costs
the seconds of one grading run.
"""

# the solution's forward pass with one piece to change, for the vit_logits entries
_VIT = '''
def vit_logits(params, images, cfg):
    P, n_heads, eps = cfg["patch_size"], cfg["n_heads"], cfg["norm_eps"]
    b, c, height, width = images.shape
    gh, gw = height // P, width // P
    patches = images.reshape(b, c, gh, P, gw, P).PERMUTE.reshape(b, gh * gw, c * P * P)
    w = params["patch_embed.proj.weight"]
    x = patches.to(w.dtype) @ w.reshape(w.shape[0], -1).T + params["patch_embed.proj.bias"]
    z = TOKENS
    n, d = z.shape[1], z.shape[2]

    def linear(t, name):
        return t @ params[name + ".weight"].T + params[name + ".bias"]

    def heads(t):
        return t.reshape(b, n, n_heads, -1).transpose(1, 2)

    for i in range(cfg["n_layers"]):
        p = f"blocks.{i}."
        h = layer_norm(z, params[p + "attn_res.norm.weight"], params[p + "attn_res.norm.bias"], eps)
        q, k, v = (heads(linear(h, p + f"attn.{m}")) for m in ("q_proj", "k_proj", "v_proj"))
        z = z + linear((ATTEND).transpose(1, 2).reshape(b, n, d), p + "attn.out_proj")
        h = layer_norm(z, params[p + "mlp_res.norm.weight"], params[p + "mlp_res.norm.bias"], eps)
        z = z + linear(ACT(linear(h, p + "mlp.fc1")), p + "mlp.fc2")
    return linear(POOLED, "head")
'''
_RIGHT_VIT = dict(PERMUTE="permute(0, 2, 4, 1, 3, 5)",
                  TOKENS='torch.cat([params["cls_token"].expand(b, -1, -1), x], dim=1) + params["pos_embed"]',
                  ATTEND="attention(q, k, v)", ACT="gelu",
                  POOLED='layer_norm(z[:, 0], params["norm.weight"], params["norm.bias"], eps)')


def _vit(**change):
    source = _VIT
    for key, value in {**_RIGHT_VIT, **change}.items():
        source = source.replace(key, value)
    return source


_LOOP = '''
def train_loop(params, images, labels, cfg, hp, generator):
    decay = [p for p in params.values() if p.ndim >= 2]
    no_decay = [p for p in params.values() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": hp["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}], lr=hp["max_lr"])
    losses = []
    for step in range(1, hp["steps"] + 1):
        idx = torch.randint(len(images), (hp["batch_size"],), generator=generator)
        x = augment(images[idx], hp["max_shift"], generator)
        loss = torch.nn.functional.cross_entropy(vit_logits(params, x, cfg), labels[idx])
        opt.zero_grad()
        loss.backward()
        clip_grad_norm(params.values(), hp["max_norm"])
        for group in opt.param_groups:
            group["lr"] = lr_at(step, hp["max_lr"], hp["warmup_steps"], hp["steps"], hp["min_lr"])
        opt.step()
        losses.append(loss.item())
    return losses
'''


def _loop(*pairs: tuple[str, str]) -> str:
    source = _LOOP
    for old, new in pairs:
        assert old in source, old
        source = source.replace(old, new)
    return source


_AUGMENT = '''
def augment(images, max_shift, generator):
    b, _, height, width = images.shape
    shifts = SHIFTS
    m = max_shift
    padded = torch.nn.functional.pad(images, (m, m, m, m), value=FILL)
    out = torch.empty_like(images)
    for i in range(b):
        dy, dx = PAIR
        out[i] = padded[i, :, m - dy: m - dy + height, m - dx: m - dx + width]
    return out
'''


def _augment(**change):
    source = _AUGMENT
    right = dict(SHIFTS="torch.randint(-max_shift, max_shift + 1, (b, 2), generator=generator)", FILL="-1.0",
                 PAIR="shifts[i].tolist()")
    for key, value in {**right, **change}.items():
        source = source.replace(key, value)
    return source


def _recipe(body: str) -> str:
    return '''
def train_vit(images, labels, num_classes, steps, seed):
    cfg = dict(RECIPE, num_classes=num_classes)
    params = init_params(cfg, torch.Generator().manual_seed(seed))
    hp = dict(steps=steps, batch_size=64, max_lr=2e-3, min_lr=2e-4, warmup_steps=20, weight_decay=0.05,
              max_norm=1.0, max_shift=1)
''' + body


WRONG = [
    # ------------------------------------------------------------ count_params
    dict(exercise="count_params", diagnosis="Likely mistake: dim numbers are missing", mistake="no class token",
         source='''
def count_params(cfg):
    d, h, p, k = cfg["dim"], cfg["mlp_hidden"], cfg["patch_size"], cfg["num_classes"]
    n = (cfg["image_size"] // p) ** 2
    embed = (cfg["in_chans"] * p * p + 1) * d + (n + 1) * d
    return embed + cfg["n_layers"] * (4 * (d * d + d) + 2 * d * h + h + d + 4 * d) + 2 * d + k * d + k
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: dim numbers are missing",
         mistake="gives the class token no position", source='''
def count_params(cfg):
    d, h, p, k = cfg["dim"], cfg["mlp_hidden"], cfg["patch_size"], cfg["num_classes"]
    n = (cfg["image_size"] // p) ** 2
    embed = (cfg["in_chans"] * p * p + 1) * d + d + n * d
    return embed + cfg["n_layers"] * (4 * (d * d + d) + 2 * d * h + h + d + 4 * d) + 2 * d + k * d + k
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: the biases are left out", mistake="counts matrices only",
         source='''
def count_params(cfg):
    d, h, p, k = cfg["dim"], cfg["mlp_hidden"], cfg["patch_size"], cfg["num_classes"]
    n = (cfg["image_size"] // p) ** 2
    embed = cfg["in_chans"] * p * p * d + d + (n + 1) * d
    return embed + cfg["n_layers"] * (4 * d * d + 2 * d * h + 4 * d) + 2 * d + k * d
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: each LayerNorm is counted with its gain only",
         mistake="counts LayerNorm as RMSNorm", source='''
def count_params(cfg):
    d, h, p, k = cfg["dim"], cfg["mlp_hidden"], cfg["patch_size"], cfg["num_classes"]
    n = (cfg["image_size"] // p) ** 2
    embed = (cfg["in_chans"] * p * p + 1) * d + d + (n + 1) * d
    return embed + cfg["n_layers"] * (4 * (d * d + d) + 2 * d * h + h + d + 2 * d) + d + k * d + k
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: the attention is counted with three matrices",
         mistake="forgets the output projection", source='''
def count_params(cfg):
    d, h, p, k = cfg["dim"], cfg["mlp_hidden"], cfg["patch_size"], cfg["num_classes"]
    n = (cfg["image_size"] // p) ** 2
    embed = (cfg["in_chans"] * p * p + 1) * d + d + (n + 1) * d
    return embed + cfg["n_layers"] * (3 * (d * d + d) + 2 * d * h + h + d + 4 * d) + 2 * d + k * d + k
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: the number of patches is image_size / patch_size",
         mistake="counts one row of patches", source='''
def count_params(cfg):
    d, h, p, k = cfg["dim"], cfg["mlp_hidden"], cfg["patch_size"], cfg["num_classes"]
    n = cfg["image_size"] // p
    embed = (cfg["in_chans"] * p * p + 1) * d + d + (n + 1) * d
    return embed + cfg["n_layers"] * (4 * (d * d + d) + 2 * d * h + h + d + 4 * d) + 2 * d + k * d + k
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: the final LayerNorm before the head is left out",
         mistake="forgets the final norm", source='''
def count_params(cfg):
    d, h, p, k = cfg["dim"], cfg["mlp_hidden"], cfg["patch_size"], cfg["num_classes"]
    n = (cfg["image_size"] // p) ** 2
    embed = (cfg["in_chans"] * p * p + 1) * d + d + (n + 1) * d
    return embed + cfg["n_layers"] * (4 * (d * d + d) + 2 * d * h + h + d + 4 * d) + k * d + k
'''),
    dict(exercise="count_params", diagnosis="Likely mistake: the classification head is left out",
         mistake="counts the encoder only", source='''
def count_params(cfg):
    d, h, p = cfg["dim"], cfg["mlp_hidden"], cfg["patch_size"]
    n = (cfg["image_size"] // p) ** 2
    embed = (cfg["in_chans"] * p * p + 1) * d + d + (n + 1) * d
    return embed + cfg["n_layers"] * (4 * (d * d + d) + 2 * d * h + h + d + 4 * d) + 2 * d
'''),
    # ------------------------------------------------------------ vit_logits
    dict(exercise="vit_logits", diagnosis="Likely mistake: the positions are not added",
         mistake="forgets the positions", source=_vit(
             TOKENS='torch.cat([params["cls_token"].expand(b, -1, -1), x], dim=1)')),
    dict(exercise="vit_logits", diagnosis="Likely mistake: the head reads the mean of the patch tokens",
         mistake="mean-pools the patches instead of reading the class token", source=_vit(
             POOLED='layer_norm(z[:, 1:], params["norm.weight"], params["norm.bias"], eps).mean(dim=1)')),
    dict(exercise="vit_logits", diagnosis="Likely mistake: the head reads the mean of every token",
         mistake="mean-pools every token, the class token's included", source=_vit(
             POOLED='layer_norm(z, params["norm.weight"], params["norm.bias"], eps).mean(dim=1)')),
    dict(exercise="vit_logits", diagnosis="Likely mistake: the class token is appended after the patches",
         mistake="puts the class token last", source=_vit(
             TOKENS='torch.cat([x, params["cls_token"].expand(b, -1, -1)], dim=1) + params["pos_embed"]',
             POOLED='layer_norm(z[:, -1], params["norm.weight"], params["norm.bias"], eps)')),
    dict(exercise="vit_logits", diagnosis="Likely mistake: the attention is causal",
         mistake="keeps the GPT's causal mask", source=_vit(ATTEND='''(q @ k.transpose(-2, -1) / math.sqrt(
            q.shape[-1])).masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf")).softmax(-1) @ v''')),
    dict(exercise="vit_logits", diagnosis="Likely mistake: the final LayerNorm before the head is missing.",
         mistake="skips the final norm", source=_vit(POOLED="z[:, 0]")),
    dict(exercise="vit_logits", diagnosis="Likely mistake: the scores are not scaled by 1/sqrt(head_dim).",
         mistake="forgets the 1/sqrt(d) scale", source=_vit(ATTEND="(q @ k.transpose(-2, -1)).softmax(-1) @ v")),
    dict(exercise="vit_logits", diagnosis="Likely mistake: the patch vectors are in (row, column, channel) order",
         mistake="flattens each patch channel-last", source=_vit(PERMUTE="permute(0, 2, 4, 3, 5, 1)")),
    dict(exercise="vit_logits", diagnosis="Likely mistake: the GELU is the tanh approximation",
         mistake="uses GELU's tanh approximation", source=_vit(
             ACT='(lambda t: torch.nn.functional.gelu(t, approximate="tanh"))')),
    dict(exercise="vit_logits", diagnosis="Likely mistake: the LayerNorm shifts (bias) are not added",
         mistake="normalizes without the shifts", source='''
def no_shift_norm(x, weight, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) * torch.rsqrt((x - mean).pow(2).mean(dim=-1, keepdim=True) + eps) * weight
''' + _vit().replace("layer_norm(", "no_shift_norm(")),
    dict(exercise="vit_logits", diagnosis="Likely mistake: this is a post-LN model",
         mistake="writes the 2017 post-LN block", source='''
def vit_logits(params, images, cfg):
    P, n_heads, eps = cfg["patch_size"], cfg["n_heads"], cfg["norm_eps"]
    b, c, height, width = images.shape
    g = height // P
    patches = images.reshape(b, c, g, P, g, P).permute(0, 2, 4, 1, 3, 5).reshape(b, g * g, c * P * P)
    w = params["patch_embed.proj.weight"]
    x = patches @ w.reshape(w.shape[0], -1).T + params["patch_embed.proj.bias"]
    z = torch.cat([params["cls_token"].expand(b, -1, -1), x], dim=1) + params["pos_embed"]
    n, d = z.shape[1], z.shape[2]
    lin = lambda t, name: t @ params[name + ".weight"].T + params[name + ".bias"]
    for i in range(cfg["n_layers"]):
        p = f"blocks.{i}."
        q, k, v = (lin(z, p + f"attn.{m}").reshape(b, n, n_heads, -1).transpose(1, 2)
                   for m in ("q_proj", "k_proj", "v_proj"))
        z = layer_norm(z + lin(attention(q, k, v).transpose(1, 2).reshape(b, n, d), p + "attn.out_proj"),
                       params[p + "attn_res.norm.weight"], params[p + "attn_res.norm.bias"], eps)
        z = layer_norm(z + lin(gelu(lin(z, p + "mlp.fc1")), p + "mlp.fc2"),
                       params[p + "mlp_res.norm.weight"], params[p + "mlp_res.norm.bias"], eps)
    return lin(z[:, 0], "head")
'''),
    dict(exercise="vit_logits", diagnosis="gives wrong values", mistake="merges the heads without transposing back",
         source=_vit().replace("(attention(q, k, v)).transpose(1, 2).reshape(b, n, d)",
                               "attention(q, k, v).reshape(b, n, d)")),
    dict(exercise="vit_logits", diagnosis="gives wrong values", mistake="cuts patches with a reshape alone",
         source=_vit().replace("images.reshape(b, c, gh, P, gw, P).permute(0, 2, 4, 1, 3, 5)", "images")),
    dict(exercise="vit_logits", diagnosis="gives wrong values", mistake="uses ReLU in the MLP",
         source=_vit(ACT="torch.relu")),
    # ------------------------------------------------------------ augment
    dict(exercise="augment", diagnosis="Likely mistake: the images wrap around", mistake="shifts with torch.roll",
         source='''
def augment(images, max_shift, generator):
    shifts = torch.randint(-max_shift, max_shift + 1, (len(images), 2), generator=generator)
    return torch.stack([torch.roll(img, (dy, dx), dims=(1, 2)) for img, (dy, dx) in zip(images, shifts.tolist())])
'''),
    dict(exercise="augment", diagnosis="Likely mistake: the uncovered pixels are 0", mistake="pads with zeros",
         source=_augment(FILL="0.0")),
    dict(exercise="augment", diagnosis="Likely mistake: the two shifts are swapped", mistake="reads (dx, dy)",
         source=_augment(PAIR="shifts[i].tolist()[::-1]")),
    dict(exercise="augment", diagnosis="Likely mistake: the images move the opposite way",
         mistake="moves each image by (-dy, -dx)", source=_augment(PAIR="(-shifts[i]).tolist()")),
    dict(exercise="augment", diagnosis="Likely mistake: every image of the batch moves by the same shift",
         mistake="draws one shift for the batch", source=_augment(
             SHIFTS="torch.randint(-max_shift, max_shift + 1, (2,), generator=generator).expand(b, 2)")),
    dict(exercise="augment", diagnosis="gives wrong values", mistake="draws the shifts from [0, 2 * max_shift]",
         source=_augment(SHIFTS="torch.randint(0, 2 * max_shift + 1, (b, 2), generator=generator)")),
    dict(exercise="augment", diagnosis="returned its input tensor itself", mistake="changes the images in place",
         source='''
def augment(images, max_shift, generator):
    b, _, height, width = images.shape
    shifts = torch.randint(-max_shift, max_shift + 1, (b, 2), generator=generator)
    m = max_shift
    padded = torch.nn.functional.pad(images, (m, m, m, m), value=-1.0)
    for i in range(b):
        dy, dx = shifts[i].tolist()
        images[i] = padded[i, :, m - dy: m - dy + height, m - dx: m - dx + width]
    return images
'''),
    # ------------------------------------------------------------ train_loop
    dict(exercise="train_loop", diagnosis="Likely mistake: the gradients are never zeroed",
         mistake="forgets zero_grad", source=_loop(("        opt.zero_grad()\n", ""))),
    dict(exercise="train_loop", diagnosis="Likely mistake: the images are not augmented",
         mistake="trains on the images as they are", source=_loop(
             ('x = augment(images[idx], hp["max_shift"], generator)', "x = images[idx]"))),
    dict(exercise="train_loop", diagnosis="Likely mistake: the whole set is shifted before the batch is drawn",
         mistake="shifts every image, then draws the batch", source=_loop(
             ('        idx = torch.randint(len(images), (hp["batch_size"],), generator=generator)\n'
              '        x = augment(images[idx], hp["max_shift"], generator)',
              '        moved = augment(images, hp["max_shift"], generator)\n'
              '        idx = torch.randint(len(images), (hp["batch_size"],), generator=generator)\n'
              '        x = moved[idx]'))),
    dict(exercise="train_loop", diagnosis="Likely mistake: the labels are not the batch's",
         mistake="scores the batch against the first labels", source=_loop(
             ("labels[idx])", 'labels[:hp["batch_size"]])'))),
    dict(exercise="train_loop", diagnosis="Likely mistake: every parameter is decayed",
         mistake="decays the biases and the norms too", source=_loop(
             ('[{"params": decay, "weight_decay": hp["weight_decay"]},\n'
              '                             {"params": no_decay, "weight_decay": 0.0}], lr=hp["max_lr"])',
              'list(params.values()), lr=hp["max_lr"], weight_decay=hp["weight_decay"])'))),
    dict(exercise="train_loop", diagnosis="Likely mistake: the gradients are not clipped before the step",
         mistake="never clips", source=_loop(('        clip_grad_norm(params.values(), hp["max_norm"])\n', ""))),
    dict(exercise="train_loop", diagnosis="Likely mistake: the learning rate stays at max_lr",
         mistake="never sets the schedule's rate", source=_loop(
             ('group["lr"] = lr_at(step, hp["max_lr"], hp["warmup_steps"], hp["steps"], hp["min_lr"])',
              'group["lr"] = hp["max_lr"]'))),
    dict(exercise="train_loop", diagnosis="Likely mistake: the schedule counts the updates from 0",
         mistake="passes step - 1 to lr_at", source=_loop(("lr_at(step,", "lr_at(step - 1,"))),
    dict(exercise="train_loop", diagnosis="Likely mistake: a new optimizer is made at every update",
         mistake="makes the optimizer inside the loop", source=_loop(
             ("    losses = []\n    for step in range(1, hp[\"steps\"] + 1):\n",
              "    losses = []\n    for step in range(1, hp[\"steps\"] + 1):\n"
              "        opt = torch.optim.AdamW([{\"params\": decay, \"weight_decay\": hp[\"weight_decay\"]},\n"
              "                                 {\"params\": no_decay, \"weight_decay\": 0.0}],\n"
              "                                lr=hp[\"max_lr\"])\n"))),
    dict(exercise="train_loop", diagnosis="Likely mistake: this is Adam with an L2 penalty",
         mistake="uses torch.optim.Adam", source=_loop(("torch.optim.AdamW(", "torch.optim.Adam("))),
    dict(exercise="train_loop", diagnosis="right values in the wrong types", mistake="returns the losses as tensors",
         source=_loop(("losses.append(loss.item())", "losses.append(loss.detach())"))),
    # ------------------------------------------------------------ evaluate
    dict(exercise="evaluate", diagnosis="Likely mistake: the accuracy is a count",
         mistake="returns how many are right", source='''
def evaluate(params, images, labels, cfg, batch_size=256):
    total, correct = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            logits = vit_logits(params, images[start:start + batch_size], cfg)
            y = labels[start:start + batch_size]
            total += torch.nn.functional.cross_entropy(logits, y, reduction="sum").item()
            correct += int((logits.argmax(dim=-1) == y).sum())
    return total / len(images), float(correct)
'''),
    dict(exercise="evaluate", diagnosis="Likely mistake: the loss is the mean of the chunks' means",
         mistake="averages the chunks' mean losses", source='''
def evaluate(params, images, labels, cfg, batch_size=256):
    means, correct = [], 0
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            logits = vit_logits(params, images[start:start + batch_size], cfg)
            y = labels[start:start + batch_size]
            means.append(torch.nn.functional.cross_entropy(logits, y).item())
            correct += int((logits.argmax(dim=-1) == y).sum())
    return sum(means) / len(means), correct / len(images)
'''),
    dict(exercise="evaluate", diagnosis="Likely mistake: the pair is (accuracy, loss)", mistake="swaps the pair",
         source='''
def evaluate(params, images, labels, cfg, batch_size=256):
    with torch.no_grad():
        logits = vit_logits(params, images, cfg)
    loss = torch.nn.functional.cross_entropy(logits, labels).item()
    return (logits.argmax(dim=-1) == labels).double().mean().item(), loss
'''),
    dict(exercise="evaluate", diagnosis="gives a wrong result", mistake="takes the argmax over the batch axis",
         source='''
def evaluate(params, images, labels, cfg, batch_size=256):
    total, correct = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(images), batch_size):
            logits = vit_logits(params, images[start:start + batch_size], cfg)
            y = labels[start:start + batch_size]
            total += torch.nn.functional.cross_entropy(logits, y, reduction="sum").item()
            correct += int((logits.argmax(dim=0)[:len(y)] == y).sum())
    return total / len(images), correct / len(images)
'''),
    dict(exercise="evaluate", diagnosis="gives a wrong result", mistake="leaves out the last, shorter chunk",
         source='''
def evaluate(params, images, labels, cfg, batch_size=256):
    total, correct, seen = 0.0, 0, 0
    with torch.no_grad():
        for start in range(0, len(images) - batch_size + 1, batch_size):
            logits = vit_logits(params, images[start:start + batch_size], cfg)
            y = labels[start:start + batch_size]
            total += torch.nn.functional.cross_entropy(logits, y, reduction="sum").item()
            correct += int((logits.argmax(dim=-1) == y).sum())
            seen += len(y)
    return total / seen, correct / seen
'''),
    # ------------------------------------------------------------ train_vit
    dict(exercise="train_vit", diagnosis="That is chance",
         mistake="scores every batch against the first 64 labels", source='''
def train_vit(images, labels, num_classes, steps, seed):
    cfg = dict(RECIPE, num_classes=num_classes)
    params = init_params(cfg, torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed + 1)
    opt = torch.optim.AdamW(list(params.values()), lr=2e-3)
    for step in range(steps):
        idx = torch.randint(len(images), (64,), generator=g)
        loss = torch.nn.functional.cross_entropy(vit_logits(params, images[idx], cfg), labels[:64])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return cfg, {name: p.detach() for name, p in params.items()}
'''),
    dict(exercise="train_vit", diagnosis="That is chance",
         mistake="returns freshly initialised parameters, not the trained ones", source=_recipe('''
    train_loop(init_params(cfg, torch.Generator().manual_seed(seed)), images, labels, cfg, dict(hp, steps=5),
               torch.Generator().manual_seed(seed + 1))
    return cfg, {name: p.detach() for name, p in params.items()}
''')),
    dict(exercise="train_vit", diagnosis="the recipe must reach", mistake="trains for 40 updates only",
         source=_recipe('''
    train_loop(params, images, labels, cfg, dict(hp, steps=40), torch.Generator().manual_seed(seed + 1))
    return cfg, {name: p.detach() for name, p in params.items()}
''')),
    dict(exercise="train_vit", diagnosis="holds NaN or infinite values", mistake="a learning rate that diverges",
         source=_recipe('''
    train_loop(params, images, labels, cfg, dict(hp, steps=3, max_lr=1e30, min_lr=1e30, warmup_steps=0,
                                                  max_norm=1e30), torch.Generator().manual_seed(seed + 1))
    return cfg, {name: p.detach() for name, p in params.items()}
''')),
    dict(exercise="train_vit", diagnosis="must return a pair (cfg, params)", mistake="returns the losses",
         source=_recipe('''
    return train_loop(params, images, labels, cfg, dict(hp, steps=2), torch.Generator().manual_seed(seed + 1))
''')),
    dict(exercise="train_vit", diagnosis="cfg has num_classes=", mistake="keeps a head for 11 classes", source='''
def train_vit(images, labels, num_classes, steps, seed):
    cfg = dict(RECIPE, num_classes=num_classes + 1)
    params = init_params(cfg, torch.Generator().manual_seed(seed))
    return cfg, {name: p.detach() for name, p in params.items()}
'''),
    dict(exercise="train_vit", diagnosis="must divide", mistake="a patch size that does not tile the image",
         source='''
def train_vit(images, labels, num_classes, steps, seed):
    cfg = dict(RECIPE, num_classes=num_classes, patch_size=5)
    return cfg, {name: torch.zeros(shape) for name, shape in param_shapes(dict(cfg, patch_size=7)).items()}
'''),
]

RIGHT = [
    dict(exercise="count_params", how="from param_shapes' pieces, summed in another order", source='''
def count_params(cfg):
    d, h, k = cfg["dim"], cfg["mlp_hidden"], cfg["num_classes"]
    tokens = (cfg["image_size"] // cfg["patch_size"]) ** 2 + 1
    attention = 4 * d * (d + 1)
    mlp = h * (d + 1) + d * (h + 1)
    norms = 4 * d
    return (tokens + 1) * d + d * (cfg["in_chans"] * cfg["patch_size"] ** 2 + 1) \\
        + cfg["n_layers"] * (attention + mlp + norms) + 2 * d + (d + 1) * k
'''),
    dict(exercise="vit_logits", how="F.unfold for the patches, einsum for the heads", source='''
def vit_logits(params, images, cfg):
    P, H, eps = cfg["patch_size"], cfg["n_heads"], cfg["norm_eps"]
    F = torch.nn.functional
    w = params["patch_embed.proj.weight"]
    cols = F.unfold(images.to(w.dtype), kernel_size=P, stride=P).transpose(1, 2)
    x = cols @ w.flatten(1).T + params["patch_embed.proj.bias"]
    b = x.shape[0]
    z = torch.cat([params["cls_token"].expand(b, 1, -1), x], 1) + params["pos_embed"]
    for i in range(cfg["n_layers"]):
        p = lambda name: params[f"blocks.{i}.{name}"]
        h = F.layer_norm(z, z.shape[-1:], p("attn_res.norm.weight"), p("attn_res.norm.bias"), eps)
        q, k, v = (F.linear(h, p(f"attn.{m}.weight"), p(f"attn.{m}.bias")).unflatten(-1, (H, -1))
                   for m in ("q_proj", "k_proj", "v_proj"))
        s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
        a = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v).flatten(2)
        z = z + F.linear(a, p("attn.out_proj.weight"), p("attn.out_proj.bias"))
        h = F.layer_norm(z, z.shape[-1:], p("mlp_res.norm.weight"), p("mlp_res.norm.bias"), eps)
        z = z + F.linear(F.gelu(F.linear(h, p("mlp.fc1.weight"), p("mlp.fc1.bias"))), p("mlp.fc2.weight"),
                         p("mlp.fc2.bias"))
    z = F.layer_norm(z[:, 0], z.shape[-1:], params["norm.weight"], params["norm.bias"], eps)
    return F.linear(z, params["head.weight"], params["head.bias"])
'''),
    dict(exercise="augment", how="a background canvas and slices of the image copied into it", source='''
def augment(images, max_shift, generator):
    b, _, height, width = images.shape
    shifts = torch.randint(-max_shift, max_shift + 1, (b, 2), generator=generator)
    out = torch.full_like(images, -1.0)
    for i, (dy, dx) in enumerate(shifts.tolist()):
        out[i, :, max(dy, 0):height + min(dy, 0), max(dx, 0):width + min(dx, 0)] = \\
            images[i, :, max(-dy, 0):height - max(dy, 0), max(-dx, 0):width - max(dx, 0)]
    return out
'''),
    dict(exercise="train_loop", how="zero_grad(set_to_none=True), the decay split by name, clipping by torch",
         source='''
def train_loop(params, images, labels, cfg, hp, generator):
    matrices = [p for name, p in params.items() if p.dim() > 1]
    vectors = [p for name, p in params.items() if p.dim() <= 1]
    opt = torch.optim.AdamW([dict(params=matrices, weight_decay=hp["weight_decay"]),
                             dict(params=vectors, weight_decay=0.0)], lr=0.0, betas=(0.9, 0.999))
    losses = []
    step = 0
    while step < hp["steps"]:
        step += 1
        idx = torch.randint(len(images), (hp["batch_size"],), generator=generator)
        batch = augment(images[idx], hp["max_shift"], generator)
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(vit_logits(params, batch, cfg), labels[idx])
        loss.backward()
        grads = [p.grad for p in params.values() if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
        if norm > hp["max_norm"]:
            with torch.no_grad():
                for g in grads:
                    g.mul_(hp["max_norm"] / (norm + 1e-6))
        rate = lr_at(step, hp["max_lr"], hp["warmup_steps"], hp["steps"], hp["min_lr"])
        for group in opt.param_groups:
            group["lr"] = rate
        opt.step()
        losses.append(float(loss))
    return losses
'''),
    dict(exercise="evaluate", how="every image in one batch when they fit, the loss summed by hand", source='''
def evaluate(params, images, labels, cfg, batch_size=256):
    total = correct = 0.0
    with torch.no_grad():
        for x, y in zip(images.split(batch_size), labels.split(batch_size)):
            logp = torch.log_softmax(vit_logits(params, x, cfg), dim=-1)
            total += -logp.gather(1, y[:, None]).sum().item()
            correct += (logp.argmax(-1) == y).sum().item()
    return float(total / len(images)), float(correct / len(images))
'''),
    dict(exercise="train_vit", how="Adam at a constant rate, no decay, no clipping, no shifts, in a loop of its own",
         source='''
def train_vit(images, labels, num_classes, steps, seed):
    cfg = dict(RECIPE, num_classes=num_classes)
    params = init_params(cfg, torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(seed + 1)
    opt = torch.optim.Adam(list(params.values()), lr=1e-3)
    for step in range(steps):
        idx = torch.randint(len(images), (64,), generator=g)
        loss = torch.nn.functional.cross_entropy(vit_logits(params, images[idx], cfg), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return cfg, {name: p.detach() for name, p in params.items()}
'''),
]
