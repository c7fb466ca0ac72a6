"""The NVRTC build of a ggml tree's sources (docs/GGML.md, "NVRTC"): this project's own prelude and stub
headers, written once into the cache (a folder named by their hash) and put first on the include path.

NVRTC has no C or C++ standard library, and ggml-cuda's headers bring host code with them (cuBLAS, the
runtime's host API, std::vector, std::unordered_map ...). With `-default-device` that host code compiles as
device functions no kernel calls, so it needs only to parse and type-check:
- the standard headers ggml includes (<cstdint>, <vector>, <stdio.h> ...) all open `strata_std.h`: the
  fixed-width types of an LP64 host, the limits and float constants device code reads, and just enough of
  std (type traits, pair, array, min/max, find; vector, string, unordered_map, unique_ptr, mutex as shells);
- <cuda_runtime.h>, <cuda.h>, <cublas_v2.h> and <nccl.h> open `strata_cuda_host.h`: the host types,
  enumerators and calls ggml's headers name that NVRTC's built-in runtime declarations lack, the CDP entry
  points a `<<<>>>` in host code lowers to, and the two device-side PDL calls (griddepcontrol) ggml's kernels
  make on sm_90 and newer, as the toolkit's runtime header defines them. Being first on the path, these
  shadow a toolkit's real headers (its cublas_api.h, cuda.h: host-only declarations NVRTC cannot take),
  whichever toolkit or wheel headers follow; cuda_fp16.h, cuda_bf16.h and the fp8/fp4 headers stay the
  toolkit's (device code uses them);
- the prelude (pre-included) drops `__extension__` and makes ggml's explicitly `__host__` functions
  (mmq.cuh's) default-device too, which NVRTC otherwise refuses.
ggml's `getenv`/`atoi` read at its launch helper become constant here: that helper keeps the result in a
function-scope static, which a device function may hold only when its initializer is a constant.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

STD_HEADER = "strata_std.h"
HOST_HEADER = "strata_cuda_host.h"
PRELUDE = "strata_prelude.h"
# Every C/C++ standard header ggml-cuda's three sources reach (mmvq.cu, convert.cu, quantize.cu and what
# they include), and the CUDA host headers; each is one line opening the shared stub.
STD_NAMES = ("assert.h", "math.h", "stdbool.h", "stddef.h", "stdint.h", "stdio.h", "stdlib.h", "string.h",
             "algorithm", "array", "cassert", "cfloat", "climits", "cmath", "cstddef", "cstdint", "cstdio",
             "cstdlib", "cstring", "initializer_list", "limits", "memory", "mutex", "string", "type_traits",
             "unordered_map", "utility", "vector")
HOST_NAMES = ("cuda_runtime.h", "cuda.h", "cublas_v2.h", "nccl.h")

_STD = """#pragma once
// strata-bench's own minimal C/C++ library for NVRTC builds of ggml's CUDA sources: what the headers
// need to parse; device code uses only the constants, type traits and small templates.
typedef signed char int8_t; typedef short int16_t; typedef int int32_t; typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
typedef unsigned long size_t; typedef long ptrdiff_t; typedef long intptr_t; typedef unsigned long uintptr_t;
typedef struct strata_file FILE;
#define UINT8_C(c) c
#define UINT16_C(c) c
#define UINT32_C(c) c ## U
#define UINT64_C(c) c ## UL
#define INT8_MAX 127
#define INT16_MAX 32767
#define INT32_MAX 2147483647
#define INT64_MAX 9223372036854775807L
#define UINT8_MAX 255
#define UINT16_MAX 65535
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615UL
#define SIZE_MAX UINT64_MAX
#define INT_MAX 2147483647
#define INT_MIN (-INT_MAX - 1)
#define UINT_MAX 4294967295U
#define USHRT_MAX 65535
#define CHAR_BIT 8
#define FLT_MAX 3.40282347e+38F
#define FLT_MIN 1.17549435e-38F
#define FLT_EPSILON 1.19209290e-7F
#define INFINITY (__int_as_float(0x7f800000))
#define NAN (__int_as_float(0x7fffffff))
#define stderr ((FILE *) 0)
#define stdout ((FILE *) 0)
int fprintf(FILE *, const char *, ...);
int snprintf(char *, size_t, const char *, ...);
int fflush(FILE *);
void abort();
void exit(int);
// constexpr: ggml's launch helper reads an environment variable into a function-scope static, which a device
// function may hold only when its initializer is a constant.
constexpr const char * getenv(const char *) { return nullptr; }
constexpr int atoi(const char *) { return 0; }
int strcmp(const char *, const char *);
size_t strlen(const char *);
namespace std {
using ::size_t;
using ::int64_t;
using ::uint64_t;
using ::int32_t;
using ::uint32_t;
using ::abort;
using ::getenv;
using ::atoi;
template <class T, T v> struct integral_constant {
    static constexpr T value = v;
    typedef T value_type;
    constexpr operator T() const { return v; }
};
typedef integral_constant<bool, true> true_type;
typedef integral_constant<bool, false> false_type;
template <class A, class B> struct is_same : false_type {};
template <class A> struct is_same<A, A> : true_type {};
template <class A, class B> inline constexpr bool is_same_v = is_same<A, B>::value;
template <bool C, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { typedef T type; };
template <bool C, class T = void> using enable_if_t = typename enable_if<C, T>::type;
template <bool C, class A, class B> struct conditional { typedef A type; };
template <class A, class B> struct conditional<false, A, B> { typedef B type; };
template <bool C, class A, class B> using conditional_t = typename conditional<C, A, B>::type;
template <class T> struct remove_reference { typedef T type; };
template <class T> struct remove_reference<T &> { typedef T type; };
template <class T> struct remove_reference<T &&> { typedef T type; };
template <class T> using remove_reference_t = typename remove_reference<T>::type;
template <class T> struct remove_cv { typedef T type; };
template <class T> struct remove_cv<const T> { typedef T type; };
template <class T> struct remove_cv<volatile T> { typedef T type; };
template <class T> struct remove_cv<const volatile T> { typedef T type; };
template <class T> using remove_cv_t = typename remove_cv<T>::type;
template <class T> constexpr const T & min(const T & a, const T & b) { return b < a ? b : a; }
template <class T> constexpr const T & max(const T & a, const T & b) { return a < b ? b : a; }
template <class I> void sort(I first, I last);
template <class I, class T> I lower_bound(I first, I last, const T & v);
template <class I, class T> constexpr I find(I first, I last, const T & v) {
    for (; first != last; ++first) if (*first == v) return first;
    return last;
}
// binbcast.cu's fused adds unpack their operands with an index sequence.
template <size_t... I> struct index_sequence {};
template <size_t N, size_t... I> struct strata_index_sequence : strata_index_sequence<N - 1, N - 1, I...> {};
template <size_t... I> struct strata_index_sequence<0, I...> { typedef index_sequence<I...> type; };
template <size_t N> using make_index_sequence = typename strata_index_sequence<N>::type;
template <class A, class B> struct pair { A first; B second; };
template <class A, class B> constexpr pair<A, B> make_pair(A a, B b) { return {a, b}; }
template <class T, size_t N> struct array {
    T elems[N > 0 ? N : 1];
    constexpr T & operator[](size_t i) { return elems[i]; }
    constexpr const T & operator[](size_t i) const { return elems[i]; }
    constexpr T * begin() { return elems; }
    constexpr T * end() { return elems + N; }
    constexpr const T * begin() const { return elems; }
    constexpr const T * end() const { return elems + N; }
    constexpr size_t size() const { return N; }
    constexpr T * data() { return elems; }
    constexpr const T * data() const { return elems; }
};
template <class T> struct numeric_limits;
template <> struct numeric_limits<uint32_t> {
    static constexpr uint32_t max() { return 4294967295U;
}
    static constexpr uint32_t min() { return 0;
} };
template <> struct numeric_limits<int32_t> {
    static constexpr int32_t max() { return 2147483647;
}
    static constexpr int32_t min() { return -2147483647 - 1;
} };
template <> struct numeric_limits<float> {
    static constexpr float max() { return FLT_MAX;
}
    static constexpr float lowest() { return -FLT_MAX;
} };
template <class T> struct hash;
template <class T> struct default_delete { void operator()(T * p) const; };
template <class T, class D = default_delete<T>> class unique_ptr {
    T * p;
public:
    unique_ptr() : p(nullptr) {}
    explicit unique_ptr(T * q) : p(q) {}
    T * get() const { return p; }
    T * operator->() const { return p; }
    T & operator*() const { return *p; }
    explicit operator bool() const { return p != nullptr; }
    void reset(T * q = nullptr) { p = q; }
    bool operator==(decltype(nullptr)) const { return p == nullptr; }
    bool operator!=(decltype(nullptr)) const { return p != nullptr; }
};
template <class T, class... A> unique_ptr<T> make_unique(A &&... a);
template <class T> class vector {
    T * b; size_t n;
public:
    vector() : b(nullptr), n(0) {}
    size_t size() const { return n; }
    bool empty() const { return n == 0; }
    T * data() { return b; }
    const T * data() const { return b; }
    T & operator[](size_t i) { return b[i]; }
    const T & operator[](size_t i) const { return b[i]; }
    T * begin() { return b; }
    T * end() { return b + n; }
    const T * begin() const { return b; }
    const T * end() const { return b + n; }
    void push_back(const T & v);
    void resize(size_t m);
    void clear();
    void reserve(size_t m);
    template <class... A> T & emplace_back(A &&... a);
};
class string {
    const char * s;
public:
    string() : s("") {}
    string(const char * t) : s(t) {}
    const char * c_str() const { return s; }
    string operator+(const string &) const { return *this; }
};
inline string operator+(const char *, const string & b) { return b; }
string to_string(int);
template <class K, class V, class H = hash<K>> class unordered_map {
public:
    struct entry { K first; V second; };
    V & operator[](const K &) { return *(V *) nullptr; }
    entry * find(const K &) const { return nullptr; }
    entry * begin() const { return nullptr; }
    entry * end() const { return nullptr; }
    template <class... A> pair<entry *, bool> emplace(A &&...) { return {nullptr, false}; }
    size_t size() const { return 0; }
    void clear() {}
};
class mutex { public: void lock(); void unlock(); };
template <class M> class lock_guard {
    M & m;
public:
    explicit lock_guard(M & x) : m(x) { m.lock(); }
    ~lock_guard() { m.unlock(); }
};
}
"""

_HOST = """#pragma once
#include "strata_std.h"
// strata-bench's stand-ins for the CUDA runtime, driver, cuBLAS and NCCL host declarations that ggml-cuda's
// headers name: types and enumerators to parse its host code (compiled as never-called device functions),
// and the two device-side PDL calls its kernels make.
typedef struct strata_cublas * cublasHandle_t;
typedef struct strata_nccl * ncclComm_t;
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
enum { CUDA_SUCCESS = 0, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102 };
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_ALLOC_FAILED = 3,
               CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_ARCH_MISMATCH = 8, CUBLAS_STATUS_MAPPING_ERROR = 11,
               CUBLAS_STATUS_EXECUTION_FAILED = 13, CUBLAS_STATUS_INTERNAL_ERROR = 14,
               CUBLAS_STATUS_NOT_SUPPORTED = 15 } cublasStatus_t;
typedef enum { CUBLAS_TENSOR_OP_MATH = 1, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
typedef enum { CUBLAS_COMPUTE_16F = 64, CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { ncclSuccess = 0 } ncclResult_t;
#define CUBLAS_VER_MAJOR 13
#define CUBLAS_VER_MINOR 0
#define cudaEventDisableTiming 0x02
#define cudaStreamNonBlocking 0x01
// NVRTC's built-in cudaFuncAttributes lacks ptxVersion, which ggml's host code reads.
#define cudaFuncAttributes strata_cudaFuncAttributes
struct cudaFuncAttributes { int ptxVersion; size_t sharedSizeBytes; int maxThreadsPerBlock; int numRegs; };
const char * cudaGetErrorString(cudaError_t);
cudaError_t cudaGetLastError();
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *, unsigned int);
cudaError_t cudaEventDestroy(cudaEvent_t);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *, unsigned int);
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *, const void *);
cudaError_t cudaFuncSetAttribute(const void *, cudaFuncAttribute, int);
cudaError_t cudaMemsetAsync(void *, int, size_t, cudaStream_t = 0);
cudaError_t cudaMemcpyAsync(void *, const void *, size_t, cudaMemcpyKind, cudaStream_t = 0);
cudaError_t cudaMemcpy2DAsync(void *, size_t, const void *, size_t, size_t, size_t, cudaMemcpyKind, cudaStream_t = 0);
cudaError_t cudaMalloc(void **, size_t);
cudaError_t cudaGraphDestroy(cudaGraph_t);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t);
template <class F, class... A>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t *, F, A &&...) { return cudaSuccess; }
CUresult cuGetErrorString(CUresult, const char **);
const char * cublasGetStatusString(cublasStatus_t);
cublasStatus_t cublasCreate(cublasHandle_t *);
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t);
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t);
cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t);
const char * ncclGetErrorString(ncclResult_t);
static inline __device__ void cudaGridDependencySynchronize() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
static inline __device__ void cudaTriggerProgrammaticLaunchCompletion() {
    asm volatile("griddepcontrol.launch_dependents;" :::);
}
// What a <<<>>> inside ggml's host functions (device functions here, never called) lowers to.
extern "C" __device__ void * cudaGetParameterBuffer(size_t alignment, size_t size);
extern "C" __device__ void * cudaGetParameterBufferV2(void * func, dim3 grid, dim3 block, unsigned int shared);
extern "C" __device__ cudaError_t cudaLaunchDevice(void * func, void * buffer, dim3 grid, dim3 block,
                                                   unsigned int shared, cudaStream_t stream);
extern "C" __device__ cudaError_t cudaLaunchDeviceV2(void * buffer, cudaStream_t stream);
"""

_PRELUDE = """#pragma once
// strata-bench's prelude for NVRTC builds of ggml's CUDA sources (see strata_bench/ggml/nvrtc_prelude.py).
#define __extension__
#undef __host__
#define __host__
"""


def headers() -> dict[str, str]:
    """file name -> text of every header the folder holds."""
    files = {STD_HEADER: _STD, HOST_HEADER: _HOST, PRELUDE: _PRELUDE}
    files.update({name: f'#pragma once\n#include "{STD_HEADER}"\n' for name in STD_NAMES})
    files.update({name: f'#pragma once\n#include "{HOST_HEADER}"\n' for name in HOST_NAMES})
    return files


def include_dir() -> Path:
    """The folder of the stub headers and the prelude, written once into the cache (renamed into place, so
    a reader never sees a half-written one)."""
    from strata_bench.kernels.build import cache_dir
    from strata_bench.kernels.cache_write import publish_folder

    files = headers()
    digest = hashlib.sha256("".join(f"{n}\0{t}\0" for n, t in sorted(files.items())).encode()).hexdigest()[:16]
    folder = cache_dir() / f"ggml-nvrtc-include-{digest}"
    # Written under a name of its own per call: compile's threads build several of ggml's sources at once,
    # and a staging folder they shared was renamed under one while another still wrote into it.
    return publish_folder(folder, {name: text.encode() for name, text in files.items()})
