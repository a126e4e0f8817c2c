// out = alpha * op(a) @ op(b) + beta * out through cuBLASLt (contract in kernels/matmul.h).
//
// Row-major to column-major: a row-major [R, C] matrix is, read column-major, its transpose
// [C, R] with leading dimension C. So the row-major product out [M, N] = op(a) [M, K] op(b) [K, N]
// is the column-major product out^T [N, M] = op(b)^T [N, K] @ op(a)^T [K, M]: cuBLASLt's A is b's
// storage, its B is a's, m' = N, n' = M, and each operand's transpose flag is its own (b's
// storage read column-major already is b^T, so transpose_b = false needs no cuBLAS transpose).
// Every leading dimension is the row-major width of the matrix as stored.
//
// dtypes: a and b both F32 or both BF16; out their dtype or F32 (BF16 inputs with F32 out is the
// weight-gradient GEMM, beta = 1). Compute CUBLAS_COMPUTE_32F with F32 scale: F32 inputs use
// true F32 (no TF32), so the GPU matches the CPU's sgemm to rounding.
//
// One cuBLASLt handle and one 32 MiB workspace per process (created on first use, on the
// device, never freed: the CUDA runtime may be gone by static destruction). The heuristic's
// algorithm is cached per (shape, transposes, dtypes, pointer alignments, epilogue), so a
// training step asks cuBLASLt once per distinct GEMM, not once per call; "no algorithm" is
// cached too.
//
// matmul_bias (linear_forward's fused path) is the same GEMM, out [M, N] = x [M, K] @ w^T, with
// CUBLASLT_EPILOGUE_BIAS. cuBLASLt adds a bias of length "rows of D" to every column of D; our D
// is out^T [N, M] column-major, whose rows are out's N columns: the bias lands on the output
// features, as bias_add_forward adds it. The bias vector's type is left at cuBLASLt's default,
// D's type (which is why linear_forward wants bias in out's dtype); the heuristic reads the bias
// pointer for its alignment, so the pointer is set on the descriptor before the heuristic runs
// and the bias's alignment is part of the cache key. matmul_bias_residual also adds a residual
// stream as the GEMM's C (beta = 1) with D = out: two matrices of one layout, C's alignment
// part of the key.
//
// matmul_bias_gelu and matmul_dgelu (BF16, for linear_forward and linear_backward_through_gelu)
// use the GELU epilogues. The auxiliary matrix (the pre-activation, written by GELU_AUX(_BIAS),
// read by DGELU) is laid out as D: out^T [N, M] column-major, leading dimension N, which
// cuBLASLt wants divisible by 8; its type defaults to D's. DGELU multiplies the GEMM's F32
// result by gelu'(aux) before rounding to D's type. Whether cuBLASLt's GELU is GPT-2's tanh
// GELU is not documented: kernels/cuda/gelu_epilogue_check.cpp finds out at run time, and the
// callers use these two only where it agrees.
//
// matmul_weight_and_bias_grad (linear_backward_weights) is the weight-gradient GEMM
// dw [N, K] += dy^T [N, rows] @ x [rows, K] with CUBLASLT_EPILOGUE_BGRADB, whose bias gradient
// is the sum over the GEMM's k (our rows) of cuBLASLt's B, one value per column of D. Our D is
// dw^T [K, N] column-major, whose columns are dw's N rows, and cuBLASLt's B is a's storage,
// dy: the sums are dy's column sums, the bias gradient. It has D's type (F32) and is
// overwritten, not accumulated (beta applies to D only).
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/cuda_runtime.h"
#include "framework/logging.h"
#include "kernels/cuda/cuda_kernels.h"

namespace ternion::cuda {

namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
// The fused bias path is only asked for with a 16-byte aligned bias: cuBLASLt documents no
// bias alignment rule beyond "the heuristic looks at the pointer", and other users of the bias
// epilogue (Marian NMT) report alignment errors below 16 bytes. A tensor owning its storage
// starts a cudaMalloc block (256-byte aligned), so only offset views fall back.
constexpr std::uint32_t kMinBiasAlignment = 16;
// The same minimum for the GELU epilogues' auxiliary matrix, and the divisor its leading
// dimension (N) must have.
constexpr std::uint32_t kMinAuxAlignment = 16;
constexpr std::int64_t kAuxLeadingDimensionDivisor = 8;

cudaDataType_t cuda_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::BF16:
      return CUDA_R_16BF;
    default:
      TN_THROW(InternalError, "matmul (cuda): no GEMM for ", dtype_name(dtype));
  }
}

// The largest power of two up to 256 that divides the address. cuBLASLt's heuristics assume
// 256-byte aligned operands unless told otherwise, and views (slices along dimension 0) start
// anywhere.
std::uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

enum class Epilogue : std::uint8_t { none, bias, gelu_aux, gelu_aux_bias, dgelu, bias_grad_b };

cublasLtEpilogue_t cublas_epilogue(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::none:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::bias:
      return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::gelu_aux:
      return CUBLASLT_EPILOGUE_GELU_AUX;
    case Epilogue::gelu_aux_bias:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case Epilogue::dgelu:
      return CUBLASLT_EPILOGUE_DGELU;
    case Epilogue::bias_grad_b:
      return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

const char* epilogue_name(Epilogue epilogue) {
  switch (epilogue) {
    case Epilogue::none:
      return "";
    case Epilogue::bias:
      return " + bias";
    case Epilogue::gelu_aux:
      return ", then GELU (pre-activation saved)";
    case Epilogue::gelu_aux_bias:
      return " + bias, then GELU (pre-activation saved)";
    case Epilogue::dgelu:
      return ", times gelu'(pre-activation)";
    case Epilogue::bias_grad_b:
      return ", and the column sums of op(a)^T";
  }
  return "?";
}

// What the GEMM does after the product, and the device pointers that needs. The bias has D's
// length and type (for bias_grad_b it is written: the sums over K of cuBLASLt's B, one per
// column of D); aux is the GELU epilogues' pre-activation, D's layout and type.
struct EpilogueOperands {
  Epilogue epilogue = Epilogue::none;
  const void* bias = nullptr;  // bias, gelu_aux_bias; bias_grad_b (written)
  const void* aux = nullptr;   // gelu_aux, gelu_aux_bias (written); dgelu (read)
  std::int64_t aux_ld = 0;     // with aux: N, D's leading dimension
};

// Owned cuBLASLt descriptors (destroyed without throwing).
class MatmulDesc {
 public:
  MatmulDesc() {
    TN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  }
  ~MatmulDesc() { (void)cublasLtMatmulDescDestroy(desc_); }
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
  void set_transposes(bool transpose_first, bool transpose_second) {
    const std::int32_t first = transpose_first ? CUBLAS_OP_T : CUBLAS_OP_N;
    const std::int32_t second = transpose_second ? CUBLAS_OP_T : CUBLAS_OP_N;
    TN_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &first, sizeof first));
    TN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &second,
                                                   sizeof second));
  }
  // The epilogue and its operands (see EpilogueOperands).
  void set_epilogue(const EpilogueOperands& operands) {
    // The attribute is a uint32_t.
    const std::uint32_t epilogue = cublas_epilogue(operands.epilogue);
    TN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                   sizeof epilogue));
    if (operands.bias != nullptr) {
      TN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                     &operands.bias, sizeof operands.bias));
    }
    if (operands.aux != nullptr) {
      TN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &operands.aux, sizeof operands.aux));
      TN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                     &operands.aux_ld, sizeof operands.aux_ld));
    }
  }
  cublasLtMatmulDesc_t get() const { return desc_; }

 private:
  cublasLtMatmulDesc_t desc_ = nullptr;
};

// A column-major matrix of `rows` x `cols` with leading dimension `rows` (a row-major
// [cols, rows] tensor).
class MatrixLayout {
 public:
  MatrixLayout(cudaDataType_t type, std::int64_t rows, std::int64_t cols) {
    TN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout_, type, static_cast<std::uint64_t>(rows),
                                               static_cast<std::uint64_t>(cols), rows));
  }
  ~MatrixLayout() { (void)cublasLtMatrixLayoutDestroy(layout_); }
  MatrixLayout(const MatrixLayout&) = delete;
  MatrixLayout& operator=(const MatrixLayout&) = delete;
  cublasLtMatrixLayout_t get() const { return layout_; }

 private:
  cublasLtMatrixLayout_t layout_ = nullptr;
};

class MatmulPreference {
 public:
  MatmulPreference() { TN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference_)); }
  ~MatmulPreference() { (void)cublasLtMatmulPreferenceDestroy(preference_); }
  MatmulPreference(const MatmulPreference&) = delete;
  MatmulPreference& operator=(const MatmulPreference&) = delete;
  void set_workspace(std::uint64_t bytes) {
    TN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        preference_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes));
  }
  void set_alignment(cublasLtMatmulPreferenceAttributes_t attribute, std::uint32_t bytes) {
    TN_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(preference_, attribute, &bytes, sizeof bytes));
  }
  cublasLtMatmulPreference_t get() const { return preference_; }

 private:
  cublasLtMatmulPreference_t preference_ = nullptr;
};

// Everything the heuristic's choice depends on.
struct GemmKey {
  std::int64_t m, n, k;
  bool transpose_a, transpose_b;
  DType input, output;
  std::uint32_t align_a, align_b, align_out;
  Epilogue epilogue;
  std::uint32_t align_bias;  // 0 without a bias
  std::uint32_t align_aux;   // 0 without an auxiliary matrix
  std::uint32_t align_c;     // C's where C is not out (a residual added by the GEMM), else 0
  auto operator<=>(const GemmKey&) const = default;
};

struct LtContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::mutex mutex;  // guards algos
  std::map<GemmKey, std::optional<cublasLtMatmulAlgo_t>> algos;  // nullopt: cuBLASLt has none
};

// Created on first use, after the runtime has bound this thread to its device.
LtContext& lt_context() {
  static LtContext* context = [] {
    auto* created = new LtContext();
    TN_CUBLAS_CHECK(cublasLtCreate(&created->handle));
    const cudaError_t status = cudaMalloc(&created->workspace, kWorkspaceBytes);
    if (status != cudaSuccess) {
      (void)cublasLtDestroy(created->handle);
      delete created;
      TN_CUDA_CHECK(status);
    }
    return created;
  }();
  return *context;
}

std::string describe(const GemmKey& key) {
  return ::ternion::detail::concat(
      "out [", key.m, ", ", key.n, "] = op(a)", key.transpose_a ? "^T" : "", " @ op(b)",
      key.transpose_b ? "^T" : "", epilogue_name(key.epilogue), " with K ", key.k, ", ",
      dtype_name(key.input), " inputs, ", dtype_name(key.output), " output, alignments a ",
      key.align_a, " b ", key.align_b, " out ", key.align_out,
      key.align_bias != 0 ? " bias " : "",
      key.align_bias != 0 ? std::to_string(key.align_bias) : "",
      key.align_aux != 0 ? " pre-activation " : "",
      key.align_aux != 0 ? std::to_string(key.align_aux) : "",
      key.align_c != 0 ? " residual (C) " : "",
      key.align_c != 0 ? std::to_string(key.align_c) : "", " bytes");
}

// `c`: the C matrix where it is not out (null: C is out).
GemmKey gemm_key(const Tensor& out, const Tensor& a, const Tensor& b, bool transpose_a,
                 bool transpose_b, const EpilogueOperands& epilogue,
                 const Tensor* c = nullptr) {
  return GemmKey{a.size(transpose_a ? 1 : 0),
                 b.size(transpose_b ? 0 : 1),
                 a.size(transpose_a ? 0 : 1),
                 transpose_a,
                 transpose_b,
                 a.dtype(),
                 out.dtype(),
                 alignment_of(a.raw_data()),
                 alignment_of(b.raw_data()),
                 alignment_of(out.raw_data()),
                 epilogue.epilogue,
                 epilogue.bias != nullptr ? alignment_of(epilogue.bias) : 0,
                 epilogue.aux != nullptr ? alignment_of(epilogue.aux) : 0,
                 c != nullptr ? alignment_of(c->raw_data()) : 0};
}

// Whether the GEMM fuses something its caller can do separately instead (an epilogue, or a
// residual as C): then cuBLASLt's "not this one" is a fallback, not an error.
bool has_fusion(const GemmKey& key) { return key.epilogue != Epilogue::none || key.align_c != 0; }

// Once per key (the caller caches the refusal), on every rank: the GPU check's summary greps
// for it.
void log_refusal(const GemmKey& key, cublasStatus_t status) {
  log_line(::ternion::detail::concat("cuBLASLt refused ", describe(key), " (",
                                     cublasGetStatusString(status),
                                     "): the separate kernels run instead"));
}

// out = alpha * op(a) @ op(b) + beta * C, then the epilogue, with the heuristic's (cached)
// algorithm; C is `c` (out's shape and dtype, contiguous) or, where null, out itself. M, N,
// K > 0. Returns false, having launched nothing, where cuBLASLt has no algorithm for the
// problem.
bool run_gemm(const GemmKey& key, Tensor& out, const Tensor& a, const Tensor& b, float alpha,
              float beta, const EpilogueOperands& epilogue, const Tensor* c = nullptr) {
  cudaStream_t stream = compute_stream();
  const std::int64_t m = key.m, n = key.n, k = key.k;
  const bool transpose_a = key.transpose_a, transpose_b = key.transpose_b;
  const cudaDataType_t input_type = cuda_dtype(key.input);
  const cudaDataType_t output_type = cuda_dtype(key.output);

  // out^T [N, M] = op(b)^T [N, K] @ op(a)^T [K, M], column-major (see the top of the file).
  MatmulDesc desc;
  desc.set_transposes(transpose_b, transpose_a);
  // Before the heuristic, which reads the epilogue's pointers for their alignment.
  if (epilogue.epilogue != Epilogue::none) desc.set_epilogue(epilogue);
  const MatrixLayout b_layout(input_type, transpose_b ? k : n, transpose_b ? n : k);
  const MatrixLayout a_layout(input_type, transpose_a ? m : k, transpose_a ? k : m);
  const MatrixLayout out_layout(output_type, n, m);

  LtContext& lt = lt_context();
  cublasLtMatmulAlgo_t algo;
  {
    std::lock_guard<std::mutex> lock(lt.mutex);
    auto cached = lt.algos.find(key);
    if (cached == lt.algos.end()) {
      MatmulPreference preference;
      preference.set_workspace(kWorkspaceBytes);
      preference.set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
      preference.set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
      preference.set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                               key.align_c != 0 ? key.align_c : key.align_out);
      preference.set_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_out);
      cublasLtMatmulHeuristicResult_t result{};
      int n_results = 0;
      const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
          lt.handle, desc.get(), b_layout.get(), a_layout.get(), out_layout.get(),
          out_layout.get(), preference.get(), 1, &result, &n_results);
      // With a fusion, INVALID_VALUE too means "not this combination" (cuBLASLt reports
      // some epilogue setups it does not take that way): the caller's separate kernels run.
      const bool no_algorithm =
          status == CUBLAS_STATUS_NOT_SUPPORTED ||
          (status == CUBLAS_STATUS_INVALID_VALUE && has_fusion(key));
      TN_CHECK_AS(CudaError, status == CUBLAS_STATUS_SUCCESS || no_algorithm,
                  "matmul (cuda): cublasLtMatmulAlgoGetHeuristic failed: ",
                  cublasGetStatusString(status), " for ", describe(key));
      std::optional<cublasLtMatmulAlgo_t> found;
      if (status == CUBLAS_STATUS_SUCCESS && n_results > 0 && result.state == CUBLAS_STATUS_SUCCESS)
        found = result.algo;
      if (!found && has_fusion(key)) log_refusal(key, status);
      cached = lt.algos.emplace(key, found).first;
    }
    if (!cached->second) return false;
    algo = *cached->second;
  }
  // Without `c`, C and D are both out: beta * out is read and the result written in place. C
  // has D's layout either way.
  const void* c_data = c != nullptr ? c->raw_data() : out.raw_data();
  const cublasStatus_t status = cublasLtMatmul(
      lt.handle, desc.get(), &alpha, b.raw_data(), b_layout.get(), a.raw_data(), a_layout.get(),
      &beta, c_data, out_layout.get(), out.raw_data(), out_layout.get(), &algo, lt.workspace,
      kWorkspaceBytes, stream);
  // A fusion the heuristic offered but the call refuses (a combination cuBLASLt validates
  // only here) is "no algorithm" too, remembered for the key, so the caller runs the separate
  // kernels instead of the run stopping. Those statuses are returned before anything launches.
  if (has_fusion(key) &&
      (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE)) {
    log_refusal(key, status);
    std::lock_guard<std::mutex> lock(lt.mutex);
    lt.algos[key] = std::nullopt;
    return false;
  }
  TN_CHECK_AS(CudaError, status == CUBLAS_STATUS_SUCCESS, "matmul (cuda): cublasLtMatmul failed: ",
              cublasGetStatusString(status), " for ", describe(key));
  return true;
}

}  // namespace

void matmul(Tensor& out, const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
            float alpha, float beta) {
  const std::int64_t m = a.size(transpose_a ? 1 : 0), k = a.size(transpose_a ? 0 : 1);
  const std::int64_t n = b.size(transpose_b ? 0 : 1);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // op(a) @ op(b) is zero: out = beta * out, as BLAS does (beta 0 overwrites)
    if (beta == 0.0f) {
      out.zero();
    } else if (beta != 1.0f) {
      scale(out, beta);
    }
    return;
  }
  TN_CHECK(a.dtype() == b.dtype(), "matmul (cuda): a ", a.str(), " and b ", b.str(),
           " differ in dtype");
  const GemmKey key = gemm_key(out, a, b, transpose_a, transpose_b, EpilogueOperands{});
  TN_CHECK_AS(CudaError, run_gemm(key, out, a, b, alpha, beta, EpilogueOperands{}),
              "matmul (cuda): cuBLASLt has no algorithm for ", describe(key));
}

bool matmul_bias(Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias) {
  return matmul_bias_residual(out, x, w, &bias, nullptr);
}

bool matmul_bias_residual(Tensor& out, const Tensor& x, const Tensor& w, const Tensor* bias,
                          const Tensor* residual) {
  TN_CHECK(x.dtype() == w.dtype() && out.dtype() == x.dtype() &&
               (bias == nullptr || bias->dtype() == x.dtype()) &&
               (residual == nullptr || residual->dtype() == x.dtype()),
           "matmul_bias (cuda): out ", out.str(), ", x ", x.str(), ", w ", w.str(),
           bias != nullptr ? ", bias " : "", bias != nullptr ? bias->str() : "",
           residual != nullptr ? ", residual " : "", residual != nullptr ? residual->str() : "",
           " must share one dtype");
  const std::int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  TN_CHECK(w.size(1) == k && out.size(0) == m && out.size(1) == n &&
               (bias == nullptr || (bias->dim() == 1 && bias->size(0) == n)) &&
               (residual == nullptr ||
                (residual->shape() == out.shape() && residual->is_contiguous())),
           "matmul_bias (cuda): out ", shape_str(out.shape()), " = x ", shape_str(x.shape()),
           " @ w ", shape_str(w.shape()), "^T", bias != nullptr ? " + bias " : "",
           bias != nullptr ? shape_str(bias->shape()) : "", residual != nullptr ? " + " : "",
           residual != nullptr ? residual->str() : "");
  if (m == 0 || n == 0) return true;  // nothing to write
  if (k == 0 || (bias != nullptr && alignment_of(bias->raw_data()) < kMinBiasAlignment))
    return false;
  EpilogueOperands epilogue;
  if (bias != nullptr) {
    epilogue.epilogue = Epilogue::bias;
    epilogue.bias = bias->raw_data();
  }
  const GemmKey key =
      gemm_key(out, x, w, /*transpose_a=*/false, /*transpose_b=*/true, epilogue, residual);
  return run_gemm(key, out, x, w, /*alpha=*/1.0f, /*beta=*/residual != nullptr ? 1.0f : 0.0f,
                  epilogue, residual);
}

namespace {

// Whether a GELU epilogue may be asked for: BF16 everywhere, the auxiliary matrix aligned and
// its leading dimension (n) divisible as cuBLASLt wants, and a product to compute.
bool gelu_epilogue_fits(const Tensor& pre_activation, std::int64_t n, std::int64_t k) {
  return k > 0 && n % kAuxLeadingDimensionDivisor == 0 &&
         alignment_of(pre_activation.raw_data()) >= kMinAuxAlignment;
}

void check_bf16(const char* op, std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors) {
    TN_CHECK(t->dtype() == DType::BF16 && t->is_contiguous() && t->dim() == 2, op,
             " (cuda): every operand must be a contiguous 2-D bf16 tensor, got ", t->str());
  }
}

}  // namespace

bool matmul_bias_gelu(Tensor& out, Tensor& pre_activation, const Tensor& x, const Tensor& w,
                      const Tensor* bias) {
  check_bf16("matmul_bias_gelu", {&out, &pre_activation, &x, &w});
  const std::int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  TN_CHECK(w.size(1) == k && out.size(0) == m && out.size(1) == n &&
               pre_activation.shape() == out.shape() &&
               (bias == nullptr || (bias->dtype() == DType::BF16 && bias->dim() == 1 &&
                                    bias->size(0) == n)),
           "matmul_bias_gelu (cuda): out ", out.str(), " and pre_activation ",
           pre_activation.str(), " = x ", x.str(), " @ w ", w.str(), "^T",
           bias != nullptr ? " + bias " : "", bias != nullptr ? bias->str() : "");
  if (m == 0 || n == 0) return true;  // nothing to write
  if (!gelu_epilogue_fits(pre_activation, n, k) ||
      (bias != nullptr && alignment_of(bias->raw_data()) < kMinBiasAlignment))
    return false;
  EpilogueOperands epilogue;
  epilogue.epilogue = bias != nullptr ? Epilogue::gelu_aux_bias : Epilogue::gelu_aux;
  epilogue.bias = bias != nullptr ? bias->raw_data() : nullptr;
  epilogue.aux = pre_activation.raw_data();
  epilogue.aux_ld = n;
  const GemmKey key = gemm_key(out, x, w, /*transpose_a=*/false, /*transpose_b=*/true, epilogue);
  return run_gemm(key, out, x, w, /*alpha=*/1.0f, /*beta=*/0.0f, epilogue);
}

bool matmul_dgelu(Tensor& dx, const Tensor& dy, const Tensor& w, const Tensor& pre_activation) {
  check_bf16("matmul_dgelu", {&dx, &dy, &w, &pre_activation});
  const std::int64_t m = dy.size(0), k = dy.size(1), n = w.size(1);
  TN_CHECK(w.size(0) == k && dx.size(0) == m && dx.size(1) == n &&
               pre_activation.shape() == dx.shape(),
           "matmul_dgelu (cuda): dx ", dx.str(), " = (dy ", dy.str(), " @ w ", w.str(),
           ") * gelu'(pre_activation ", pre_activation.str(), ")");
  if (m == 0 || n == 0) return true;  // nothing to write
  if (!gelu_epilogue_fits(pre_activation, n, k)) return false;
  EpilogueOperands epilogue;
  epilogue.epilogue = Epilogue::dgelu;
  epilogue.aux = pre_activation.raw_data();
  epilogue.aux_ld = n;
  const GemmKey key = gemm_key(dx, dy, w, /*transpose_a=*/false, /*transpose_b=*/false, epilogue);
  return run_gemm(key, dx, dy, w, /*alpha=*/1.0f, /*beta=*/0.0f, epilogue);
}

bool matmul_weight_and_bias_grad(Tensor& dw, Tensor& bias_grad, const Tensor& dy,
                                 const Tensor& x) {
  TN_CHECK(dw.dtype() == DType::F32 && bias_grad.dtype() == DType::F32 &&
               dy.dtype() == x.dtype() && bias_grad.is_contiguous(),
           "matmul_weight_and_bias_grad (cuda): dw ", dw.str(), " and bias_grad ",
           bias_grad.str(), " must be f32, dy ", dy.str(), " and x ", x.str(), " one dtype");
  const std::int64_t rows = dy.size(0), n = dy.size(1), k = x.size(1);
  TN_CHECK(x.size(0) == rows && dw.size(0) == n && dw.size(1) == k && bias_grad.dim() == 1 &&
               bias_grad.size(0) == n,
           "matmul_weight_and_bias_grad (cuda): dw ", shape_str(dw.shape()), " += dy ",
           shape_str(dy.shape()), "^T @ x ", shape_str(x.shape()), ", bias_grad ",
           shape_str(bias_grad.shape()));
  if (n == 0 || k == 0 || rows == 0 || alignment_of(bias_grad.raw_data()) < kMinBiasAlignment)
    return false;
  EpilogueOperands epilogue;
  epilogue.epilogue = Epilogue::bias_grad_b;
  epilogue.bias = bias_grad.raw_data();
  const GemmKey key = gemm_key(dw, dy, x, /*transpose_a=*/true, /*transpose_b=*/false, epilogue);
  return run_gemm(key, dw, dy, x, /*alpha=*/1.0f, /*beta=*/1.0f, epilogue);
}

}  // namespace ternion::cuda
