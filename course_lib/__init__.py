"""course_lib: the reference implementation behind the course.

One module per concept, named as the chapter that teaches it; later chapters
build on earlier modules, never the reverse:

* :mod:`~course_lib.tokenizer` (01): byte-level BPE.
* :mod:`~course_lib.positional` (01): token embeddings, sinusoidal, learned,
  RoPE, 2-D sin-cos, relative position indices, position-embedding resampling.
* :mod:`~course_lib.attention` (02): scaled dot-product attention (math and
  fused paths, switched by ``attn_impl``), masks.
* :mod:`~course_lib.multi_head` (03): splitting and merging heads, multi-head
  and grouped-query attention, the KV cache.
* :mod:`~course_lib.norms` (04): LayerNorm, RMSNorm.
* :mod:`~course_lib.mlp` (05): ReLU/GELU MLP, SwiGLU.
* :mod:`~course_lib.blocks` (05-07): the one ``Block`` every model runs
  (post-LN, pre-LN, res-post-norm; LayerScale, stochastic depth; attention and
  MLP plugged in), and the decoder block with cross-attention.
* :mod:`~course_lib.seq2seq` (06): the 2017 encoder-decoder Transformer.
* :mod:`~course_lib.decoder_lm` (07): a Llama-style decoder-only LM.
* :mod:`~course_lib.efficient` (08): the KV-cache step, tiled attention with
  the online softmax, sliding windows.
* :mod:`~course_lib.vit` (09): the Vision Transformer, its position variants
  and the paper's sizes; beside it :mod:`~course_lib.cnn` (09), the residual
  CNN baseline; :mod:`~course_lib.attention_as_convolution` (09), attention
  that computes a convolution; :mod:`~course_lib.hybrid` (09), a CNN stem
  feeding a ViT; :mod:`~course_lib.augment` (09), random-resized crops and
  flips; :mod:`~course_lib.deit` (09), the distillation token.
* :mod:`~course_lib.dinov2` (10): DINOv2's backbone (LayerScale, mask token,
  registers); :mod:`~course_lib.dino` (10): DINO's self-distillation recipe
  (head, loss, centering, EMA, multi-crop); :mod:`~course_lib.probes` (10):
  k-NN and linear probes of frozen features; :mod:`~course_lib.masked_image`
  (10): masked image modelling (MAE, masked patch prediction, BEiT).
* :mod:`~course_lib.swin` (11): Swin Transformer V1 and V2.

Around them: :mod:`~course_lib.counting` (parameters, FLOPs and bytes of the
layers), :mod:`~course_lib.summary` (a block's sublayers as a table),
:mod:`~course_lib.interop` (load Hugging Face weights),
:mod:`~course_lib.zoo` (the course's trained checkpoints, loaded in seconds),
:mod:`~course_lib.training` and :mod:`~course_lib.data` (the course's trainer
and synthetic data), :mod:`~course_lib.datasets` (the real data sets that ship
with the course or its packages: Python's standard library as text, MNIST and
UCI digits, three photographs), :mod:`~course_lib.lm_recipe` (the GPT capstone's reference: a
GPT as a function of its weights and the loop that trains it), :mod:`~course_lib.vit_recipe` (the ViT
capstone's: a ViT as a function of its weights, its augmentation and its loop) and
:mod:`~course_lib.experiment`
(seeds and checked claims). The hidden tests of the exercises live apart, in the ``grader``
package beside this one: course_lib never imports it.
"""

__version__ = "0.1.0"
