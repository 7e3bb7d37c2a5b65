"""What GPT-2 small's padded lm_head spends outside its GEMMs, on a GPU (PyTorch and CuPy).

models/cuda/cuda_dense.cpp computes the 50257-column head through a buffer whose rows are
padded, in chunks of 1216 of the 8192 rows, and copies each chunk out of it in forward and the
output gradient into it in backward with cudaMemcpy2DAsync. This times those copies beside
PyTorch's copy kernel doing the same and a contiguous copy of the same bytes, and the head's
GEMMs whole and in chunks (tf32), each the mean of 10 after one warm-up.

Usage (on the GPU machine): python3 bench/padded_head_copies.py
"""
import torch
from cupy.cuda import runtime as rt
torch.backends.cuda.matmul.allow_tf32 = True
R, U, P, P8, K, C = 8192, 50257, 50304, 50264, 768, 1216
out = torch.empty(R, U, device="cuda")
out2 = torch.empty(R, U, device="cuda")
pad = torch.zeros(C, P, device="cuda")
pad8 = torch.zeros(C, P8, device="cuda")
s = torch.cuda.current_stream().cuda_stream
def t(f, n=10):
    f(); torch.cuda.synchronize()
    a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n): f()
    b.record(); b.synchronize()
    return a.elapsed_time(b) / n
def m2d(src, sp):
    for r in range(0, R, C):
        n = min(C, R - r)
        rt.memcpy2DAsync(out.data_ptr() + r * U * 4, U * 4, src.data_ptr(), sp * 4, U * 4, n, 3, s)
def m2d_in(dst, dp):
    for r in range(0, R, C):
        n = min(C, R - r)
        rt.memcpy2DAsync(dst.data_ptr(), dp * 4, out.data_ptr() + r * U * 4, U * 4, U * 4, n, 3, s)
def kcopy(src):
    for r in range(0, R, C):
        n = min(C, R - r)
        out[r:r + n].copy_(src[:n, :U])
print("out of pad, memcpy2D pitch 50304: %.3f ms" % t(lambda: m2d(pad, P)))
print("out of pad, memcpy2D pitch 50264: %.3f ms" % t(lambda: m2d(pad8, P8)))
print("into pad, memcpy2D pitch 50264: %.3f ms" % t(lambda: m2d_in(pad8, P8)))
print("out of pad, torch copy_ kernel: %.3f ms" % t(lambda: kcopy(pad)))
print("contiguous 1.65 GB copy: %.3f ms" % t(lambda: out2.copy_(out)))
x = torch.randn(R, K, device="cuda"); W = torch.randn(P, K, device="cuda")
W8 = W[:50256].contiguous()
print("tf32 GEMM whole 8192x50304x768: %.3f ms" % t(lambda: torch.mm(x, W.t())))
print("tf32 GEMM chunks 1216x50304x768: %.3f ms" % t(lambda: [torch.mm(x[r:r + C], W.t()) for r in range(0, R, C)]))
print("tf32 GEMM chunks 1216x50256x768: %.3f ms" % t(lambda: [torch.mm(x[r:r + C], W8.t()) for r in range(0, R, C)]))
dy = torch.randn(R, P, device="cuda")
print("tf32 dW whole 768x50304 k8192: %.3f ms" % t(lambda: torch.mm(dy.t(), x)))
print("tf32 dx whole 8192x768 k50304: %.3f ms" % t(lambda: torch.mm(dy, W)))
