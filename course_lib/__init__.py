"""course_lib: the reference implementation behind the course.

One module per concept, named as the chapter that teaches it; later chapters
build on earlier modules, never the reverse:

* :mod:`~course_lib.tokenizer` (01): byte-level BPE.
* :mod:`~course_lib.positional` (01): token embeddings, sinusoidal, learned,
  RoPE, 2-D sin-cos, position-embedding resampling.
* :mod:`~course_lib.attention` (02, 03): scaled dot-product attention (math
  and fused paths), masks, multi-head / grouped-query attention, KV cache.
* :mod:`~course_lib.norms` (04): LayerNorm, RMSNorm.
* :mod:`~course_lib.mlp` (05): ReLU/GELU MLP, SwiGLU.
* :mod:`~course_lib.blocks` (05-07): post-LN, pre-LN and res-post-norm blocks,
  LayerScale, stochastic depth.
* :mod:`~course_lib.seq2seq` (06): the 2017 encoder-decoder Transformer.
* :mod:`~course_lib.decoder_lm` (07): a Llama-style decoder-only LM.
* :mod:`~course_lib.vit` (09), :mod:`~course_lib.dinov2` (10),
  :mod:`~course_lib.swin` (11): the vision models.

Around them: :mod:`~course_lib.interop` (load Hugging Face weights),
:mod:`~course_lib.training` and :mod:`~course_lib.data` (a small trainer and
synthetic data), and :mod:`~course_lib.grading` (what the hidden tests use).
"""

__version__ = "0.1.0"
