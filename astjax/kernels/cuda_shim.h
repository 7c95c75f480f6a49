/* astjax: CUDA kernels as C++ on the CPU (kernels/cuda_emulate.py).

   Included before a kernel module's CUDA text, it makes that text a C++ translation
   unit whose kernels run on the host with CUDA's execution model kept:

   - a launch runs the grid's blocks one after another; blockIdx, threadIdx are
     thread-locals, blockDim and gridDim the launch's;
   - a kernel without __syncthreads runs each block's threads as a loop in thread order
     (they cannot observe one another but through atomics);
   - a kernel with __syncthreads runs each block's threads as real threads (pthreads)
     meeting at a barrier, so a barrier means what it means on a GPU, and __shared__ (a static
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

#include <cmath>
#include <cstdint>
#include <pthread.h>

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
static pthread_mutex_t astjax_shim_atomic = PTHREAD_MUTEX_INITIALIZER;

/* A block's barrier: the threads still running all arrive, then all go on; a thread
   that returns is dropped from the count. */
struct astjax_shim_barrier_t {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned count, waiting, generation;
};
static astjax_shim_barrier_t *astjax_shim_barrier = nullptr;

static inline void astjax_shim_release(astjax_shim_barrier_t *b) {
    b->waiting = 0;
    b->generation++;
    pthread_cond_broadcast(&b->cond);
}

static inline void __syncthreads(void) {
    astjax_shim_barrier_t *b = astjax_shim_barrier;
    if (!b) return;
    pthread_mutex_lock(&b->lock);
    unsigned gen = b->generation;
    if (++b->waiting == b->count) {
        astjax_shim_release(b);
    } else {
        while (gen == b->generation) pthread_cond_wait(&b->cond, &b->lock);
    }
    pthread_mutex_unlock(&b->lock);
}

static inline void astjax_shim_drop(astjax_shim_barrier_t *b) {
    pthread_mutex_lock(&b->lock);
    b->count--;
    if (b->waiting && b->waiting == b->count) astjax_shim_release(b);
    pthread_mutex_unlock(&b->lock);
}

struct astjax_shim_guard {
    astjax_shim_guard() { pthread_mutex_lock(&astjax_shim_atomic); }
    ~astjax_shim_guard() { pthread_mutex_unlock(&astjax_shim_atomic); }
};

template <class T> static inline T atomicAdd(T *p, T v) {
    astjax_shim_guard g;
    T old = *p;
    *p = old + v;
    return old;
}
template <class T> static inline T atomicMax(T *p, T v) {
    astjax_shim_guard g;
    T old = *p;
    if (v > old) *p = v;
    return old;
}
template <class T> static inline T atomicMin(T *p, T v) {
    astjax_shim_guard g;
    T old = *p;
    if (v < old) *p = v;
    return old;
}
template <class T> static inline T atomicExch(T *p, T v) {
    astjax_shim_guard g;
    T old = *p;
    *p = v;
    return old;
}
template <class T> static inline T atomicCAS(T *p, T compare, T v) {
    astjax_shim_guard g;
    T old = *p;
    if (old == compare) *p = v;
    return old;
}

template <class F> struct astjax_shim_thread {
    F *body;
    unsigned block, thread;
};

template <class F> static void *astjax_shim_run(void *arg) {
    astjax_shim_thread<F> *t = (astjax_shim_thread<F> *)arg;
    blockIdx = dim3{t->block, 0, 0};
    threadIdx = dim3{t->thread, 0, 0};
    (*t->body)();
    astjax_shim_drop(astjax_shim_barrier);      /* exited: as on sm_70 and later */
    return nullptr;
}

/* Runs ``body`` (one thread's work: the kernel called with its arguments) for every
   thread of a grid of ``grid`` blocks of ``block`` threads. */
template <class F>
static int astjax_shim_launch(unsigned grid, unsigned block, bool barriers, F body) {
    if (grid == 0 || block == 0 || block > 1024) return 1;
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
        astjax_shim_barrier_t bar;
        pthread_mutex_init(&bar.lock, nullptr);
        pthread_cond_init(&bar.cond, nullptr);
        bar.count = block;
        bar.waiting = bar.generation = 0;
        astjax_shim_barrier = &bar;
        pthread_t threads[1024];
        astjax_shim_thread<F> args[1024];
        for (unsigned t = 0; t < block; ++t) {
            args[t] = astjax_shim_thread<F>{&body, b, t};
            if (pthread_create(&threads[t], nullptr, astjax_shim_run<F>, &args[t]) != 0)
                return 2;
        }
        for (unsigned t = 0; t < block; ++t) pthread_join(threads[t], nullptr);
        astjax_shim_barrier = nullptr;
        pthread_cond_destroy(&bar.cond);
        pthread_mutex_destroy(&bar.lock);
    }
    return 0;
}

#endif
