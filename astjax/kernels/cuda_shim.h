/* astjax: CUDA kernels as C++ on the CPU (kernels/cuda_emulate.py).

   Included before a kernel module's CUDA text, it makes that text a C++ translation
   unit whose kernels run on the host with CUDA's execution model kept:

   - a launch runs the grid's blocks one after another; blockIdx, threadIdx are
     thread-locals, blockDim and gridDim the launch's;
   - a kernel without __syncthreads runs each block's threads as a loop in thread order
     (they cannot observe one another but through atomics);
   - a kernel with __syncthreads runs each block's threads as real threads meeting at a
     std::barrier, so a barrier means what it means on a GPU, and __shared__ (a static
     local: one instance, shared by the block's threads, reused by the next block as
     the GPU reuses shared memory) holds what the block's threads wrote before it;
     A thread that returns leaves the barrier (as exited threads do on sm_70 and later);
   - atomicAdd/Max/Min/Exch/CAS are done under one mutex.

   Floating point follows the same rules as on the GPU for what astjax emits: IEEE
   + - * / and sqrt correctly rounded, no contraction (-ffp-contract=off, as
   --fmad=false for NVRTC).  Transcendental functions are the host libm's, as the
   device's are CUDA's: both within a few ulp of NumPy's. */
#ifndef ASTJAX_CUDA_SHIM
#define ASTJAX_CUDA_SHIM 1

#include <barrier>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

using std::isfinite;
using std::isinf;
using std::isnan;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
#define __align__(n) alignas(n)

struct dim3 {
    unsigned int x, y, z;
};

static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<> *astjax_shim_barrier = nullptr;
static std::mutex astjax_shim_atomic;

static inline void __syncthreads(void) {
    if (astjax_shim_barrier) astjax_shim_barrier->arrive_and_wait();
}

template <class T> static inline T atomicAdd(T *p, T v) {
    std::lock_guard<std::mutex> g(astjax_shim_atomic);
    T old = *p;
    *p = old + v;
    return old;
}
template <class T> static inline T atomicMax(T *p, T v) {
    std::lock_guard<std::mutex> g(astjax_shim_atomic);
    T old = *p;
    if (v > old) *p = v;
    return old;
}
template <class T> static inline T atomicMin(T *p, T v) {
    std::lock_guard<std::mutex> g(astjax_shim_atomic);
    T old = *p;
    if (v < old) *p = v;
    return old;
}
template <class T> static inline T atomicExch(T *p, T v) {
    std::lock_guard<std::mutex> g(astjax_shim_atomic);
    T old = *p;
    *p = v;
    return old;
}
template <class T> static inline T atomicCAS(T *p, T compare, T v) {
    std::lock_guard<std::mutex> g(astjax_shim_atomic);
    T old = *p;
    if (old == compare) *p = v;
    return old;
}

/* Runs ``body`` (one thread's work: the kernel called with its arguments) for every
   thread of a grid of ``grid`` blocks of ``block`` threads. */
template <class F>
static int astjax_shim_launch(unsigned grid, unsigned block, bool barriers, F body) {
    if (grid == 0 || block == 0) return 1;
    gridDim = dim3{grid, 1, 1};
    blockDim = dim3{block, 1, 1};
    for (unsigned b = 0; b < grid; ++b) {
        if (!barriers) {
            blockIdx = dim3{b, 0, 0};
            for (unsigned t = 0; t < block; ++t) {
                threadIdx = dim3{t, 0, 0};
                body();
            }
            continue;
        }
        std::barrier<> bar(block);
        astjax_shim_barrier = &bar;
        std::vector<std::thread> threads;
        threads.reserve(block);
        for (unsigned t = 0; t < block; ++t) {
            threads.emplace_back([&body, b, t] {
                blockIdx = dim3{b, 0, 0};
                threadIdx = dim3{t, 0, 0};
                body();
                astjax_shim_barrier->arrive_and_drop();   /* exited: as on sm_70+ */
            });
        }
        for (auto &th : threads) th.join();
        astjax_shim_barrier = nullptr;
    }
    return 0;
}

#endif
