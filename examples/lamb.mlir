// Data-parallel LAMB (CoCoNet, ASPLOS'22): the ranks' gradients are summed by
// an all_reduce, then every rank computes Adam's moments and applies a
// layer-wise trust ratio:
//   m1 = b1*m + (1-b1)*g          v1 = b2*v + (1-b2)*g*g
//   mhat = m1/(1-b1^t)            vhat = v1/(1-b2^t)
//   r = mhat/(sqrt(vhat)+eps) + wd*w
//   trust = norm(w)/norm(r)       w1 = w - lr*trust*r
// b1 = 0.9, b2 = 0.999, eps = 1e-6 and wd = 0.01 are constants; %lr, %b1t = b1^t
// and %b2t = b2^t are rank-0 replicated arguments. %w, %m and %v are updated.
// The norms are of replicated values; a pass that slices %w and %r rewrites
// them as sqrt(all_reduce(reduce(x*x))). Built in Python by examples/lamb.py.
//
// Run: coconet-run examples/lamb.mlir --world 4

func.func @lamb(%g: !coco.tensor<1024xf32, local>,
                %w: !coco.tensor<1024xf32, replicated>,
                %m: !coco.tensor<1024xf32, replicated>,
                %v: !coco.tensor<1024xf32, replicated>,
                %lr: !coco.tensor<f32, replicated>,
                %b1t: !coco.tensor<f32, replicated>,
                %b2t: !coco.tensor<f32, replicated>) {
  %one = coco.constant 1.000000e+00 : !coco.tensor<f32, replicated>
  %b1 = coco.constant 9.000000e-01 : !coco.tensor<f32, replicated>
  %b2 = coco.constant 9.990000e-01 : !coco.tensor<f32, replicated>
  %eps = coco.constant 1.000000e-06 : !coco.tensor<f32, replicated>
  %wd = coco.constant 1.000000e-02 : !coco.tensor<f32, replicated>
  %grad = coco.all_reduce %g reduction = sum {name = "grad_sum"} : !coco.tensor<1024xf32, local> -> !coco.tensor<1024xf32, replicated>
  // m1 = b1*m + (1-b1)*g
  %b1m = coco.mul %b1, %m : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %omb1 = coco.sub %one, %b1 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
  %m_g = coco.mul %omb1, %grad : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %m1 = coco.add %b1m, %m_g : (!coco.tensor<1024xf32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  // v1 = b2*v + (1-b2)*g*g
  %b2v = coco.mul %b2, %v : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %omb2 = coco.sub %one, %b2 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
  %omb2g = coco.mul %omb2, %grad : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %v_gg = coco.mul %omb2g, %grad : (!coco.tensor<1024xf32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %v1 = coco.add %b2v, %v_gg : (!coco.tensor<1024xf32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  // bias correction
  %bc1 = coco.sub %one, %b1t : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
  %mhat = coco.div %m1, %bc1 : (!coco.tensor<1024xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %bc2 = coco.sub %one, %b2t : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
  %vhat = coco.div %v1, %bc2 : (!coco.tensor<1024xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<1024xf32, replicated>
  // r = mhat/(sqrt(vhat)+eps) + wd*w
  %root = coco.sqrt %vhat : (!coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %denom = coco.add %root, %eps : (!coco.tensor<1024xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %adam = coco.div %mhat, %denom : (!coco.tensor<1024xf32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %decay = coco.mul %wd, %w : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %r = coco.add %adam, %decay : (!coco.tensor<1024xf32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  // trust = norm(w)/norm(r); w1 = w - lr*trust*r
  %wnorm = coco.norm %w {name = "w_norm"} : (!coco.tensor<1024xf32, replicated>) -> !coco.tensor<f32, replicated>
  %rnorm = coco.norm %r {name = "r_norm"} : (!coco.tensor<1024xf32, replicated>) -> !coco.tensor<f32, replicated>
  %trust = coco.div %wnorm, %rnorm : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
  %rate = coco.mul %lr, %trust : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
  %step = coco.mul %rate, %r : (!coco.tensor<f32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  %w1 = coco.sub %w, %step : (!coco.tensor<1024xf32, replicated>, !coco.tensor<1024xf32, replicated>) -> !coco.tensor<1024xf32, replicated>
  coco.update %w, %w1 : !coco.tensor<1024xf32, replicated>
  coco.update %m, %m1 : !coco.tensor<1024xf32, replicated>
  coco.update %v, %v1 : !coco.tensor<1024xf32, replicated>
  func.return
}
