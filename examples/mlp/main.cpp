// mlp: a user's own model on Strata — the classic first PyTorch example (a two-layer MLP
// classifier on synthetic data), written with the module API: declare layers, write forward and
// backward, let ParamStore materialise the parameters and Trainer update them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/rng.hpp"
#include "framework/nn/linear.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/train/trainer.hpp"

using namespace strata;

// A layer written by the user: ReLU with its backward rule next to its forward.
class Relu : public nn::Module {
 public:
  explicit Relu(std::string prefix) : Module(std::move(prefix)) {}
  Tensor forward(nn::Context& ctx, const Tensor& x) {
    Tensor y = ctx.act(x.shape());
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    for (std::int64_t i = 0; i < x.numel(); ++i) yp[i] = xp[i] > 0 ? xp[i] : 0.0f;
    if (ctx.grad_enabled) y_ = y;  // the output is enough to know where the gradient flows
    return y;
  }
  Tensor backward(nn::Context& ctx, const Tensor& dy) {
    Tensor dx = ctx.act(dy.shape());
    const float* y = y_.data<float>();
    const float* g = dy.data<float>();
    float* d = dx.data<float>();
    for (std::int64_t i = 0; i < dy.numel(); ++i) d[i] = y[i] > 0 ? g[i] : 0.0f;
    y_ = {};
    return dx;
  }
  void clear_saved() override { y_ = {}; }

 private:
  Tensor y_;
};

// The model: Linear → ReLU → Linear.
class Classifier : public nn::Module {
 public:
  Classifier(int in, int hidden, int classes)
      : Module("mlp"),
        fc1(child_name("fc1"), in, hidden, true, std::sqrt(2.0f / in)),
        relu(child_name("relu")),
        fc2(child_name("fc2"), hidden, classes, true, std::sqrt(1.0f / hidden)) {
    add_child(fc1);
    add_child(relu);
    add_child(fc2);
  }
  Tensor forward(nn::Context& ctx, const Tensor& x) {
    return fc2.forward(ctx, relu.forward(ctx, fc1.forward(ctx, x)));
  }
  void backward(nn::Context& ctx, const Tensor& dlogits) {
    fc1.backward(ctx, relu.backward(ctx, fc2.backward(ctx, dlogits)), /*need_dx=*/false);
  }
  nn::Linear fc1;
  Relu relu;
  nn::Linear fc2;
};

// K Gaussian blobs in D dimensions; the label is the blob.
void make_data(int n, int D, int K, std::uint64_t seed, std::vector<float>& x, std::vector<std::int32_t>& y) {
  std::vector<float> centers(static_cast<std::size_t>(K) * D);
  normal_fill(centers.data(), centers.size(), 7, "centers", 0, 0.0f, 0.6f);
  Philox r(seed);
  x.resize(static_cast<std::size_t>(n) * D);
  y.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    y[i] = static_cast<std::int32_t>(r.next_below(K));
    for (int d = 0; d < D; ++d) x[static_cast<std::size_t>(i) * D + d] = centers[y[i] * D + d] + r.next_normal();
  }
}

int main(int argc, char** argv) {
  const int D = 20, H = 64, K = 5, N = 4096, batch = 64;
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 5;
  std::vector<float> xs, xv;
  std::vector<std::int32_t> ys, yv;
  make_data(N, D, K, 1, xs, ys);
  make_data(1024, D, K, 2, xv, yv);

  Classifier model(D, H, K);
  nn::ParamStore store({model.parameters()}, nn::ParamStoreOptions{});
  store.initialize(/*seed=*/0);
  train::TrainerOptions opts;
  opts.optimizer = train::OptimizerKind::sgd;
  opts.sgd.lr = 0.05;
  opts.sgd.momentum = 0.9;
  train::Trainer trainer(store, opts);

  nn::Context ctx;
  Tensor xb = Tensor::empty({batch, D}, DType::f32);
  std::vector<float> lse(batch);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double loss = 0;
    for (int b = 0; b + batch <= N; b += batch) {
      std::copy_n(xs.data() + static_cast<std::size_t>(b) * D, batch * D, xb.data<float>());
      Tensor logits = model.forward(ctx, xb);
      loss += cpu::cross_entropy_forward(logits.data<float>(), ys.data() + b, lse.data(), batch, K) / batch;
      cpu::cross_entropy_backward(logits.data<float>(), lse.data(), ys.data() + b, logits.data<float>(),
                                  batch, K, 1.0f / batch);  // d(mean loss)/d(logits), in place
      model.backward(ctx, logits);
      trainer.step();
    }
    // Validation accuracy, nothing saved for backward.
    nn::Context eval;
    eval.grad_enabled = false;
    Tensor xvt(Storage::wrap(xv.data(), xv.size() * 4, Device::cpu()), DType::f32,
               Shape{static_cast<std::int64_t>(yv.size()), D}, {D, 1});
    Tensor logits = model.forward(eval, xvt);
    int correct = 0;
    for (std::size_t i = 0; i < yv.size(); ++i) {
      const float* l = logits.data<float>() + i * K;
      correct += static_cast<int>(std::max_element(l, l + K) - l) == yv[i];
    }
    std::printf("epoch %d: train loss %.4f, validation accuracy %.3f\n", epoch, loss / (N / batch),
                static_cast<double>(correct) / yv.size());
  }
  return 0;
}
