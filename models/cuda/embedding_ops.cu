// Kernels of a GPT-style decoder's layers.
