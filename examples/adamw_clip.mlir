// AdamW with gradient clipping by global norm (torch's clip_grad_norm_ then
// AdamW), data parallel, over three parameters: every gradient all-reduced,
// ONE norm over all of them, every update scaled by min(1, 1 / (norm +
// 1e-6)); lr, b1t = beta1^t, b2t = beta2^t are rank-0 arguments, weight
// decay 0.01. coco-optimize buckets the three parameters (the sums of
// squares become one sum over the bucket) and fuses the step into one
// cooperative kernel. Built by adamw_clip.py (--bert: BERT-large's 391).
// Run: coconet-run examples/adamw_clip.mlir --world 4

builtin.module {
  func.func @adamw_clip(%g_embedding: !coco.tensor<256x64xf32, local>, %w_embedding: !coco.tensor<256x64xf32, replicated>, %m_embedding: !coco.tensor<256x64xf32, replicated>, %v_embedding: !coco.tensor<256x64xf32, replicated>, %g_bias: !coco.tensor<64xf32, local>, %w_bias: !coco.tensor<64xf32, replicated>, %m_bias: !coco.tensor<64xf32, replicated>, %v_bias: !coco.tensor<64xf32, replicated>, %g_projection: !coco.tensor<128x32xf32, local>, %w_projection: !coco.tensor<128x32xf32, replicated>, %m_projection: !coco.tensor<128x32xf32, replicated>, %v_projection: !coco.tensor<128x32xf32, replicated>, %lr: !coco.tensor<f32, replicated>, %b1t: !coco.tensor<f32, replicated>, %b2t: !coco.tensor<f32, replicated>) {
    %embedding_grad = coco.all_reduce %g_embedding reduction = sum {name = "embedding_grad"} : !coco.tensor<256x64xf32, local> -> !coco.tensor<256x64xf32, replicated>
    %bias_grad = coco.all_reduce %g_bias reduction = sum {name = "bias_grad"} : !coco.tensor<64xf32, local> -> !coco.tensor<64xf32, replicated>
    %projection_grad = coco.all_reduce %g_projection reduction = sum {name = "projection_grad"} : !coco.tensor<128x32xf32, local> -> !coco.tensor<128x32xf32, replicated>
    %0 = coco.mul %embedding_grad, %embedding_grad : (!coco.tensor<256x64xf32, replicated>, !coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %1 = coco.reduce %0 kind = sum dims = [0, 1] : (!coco.tensor<256x64xf32, replicated>) -> !coco.tensor<f32, replicated>
    %2 = coco.mul %bias_grad, %bias_grad : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %3 = coco.reduce %2 kind = sum dims = [0] : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<f32, replicated>
    %4 = coco.add %1, %3 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %5 = coco.mul %projection_grad, %projection_grad : (!coco.tensor<128x32xf32, replicated>, !coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %6 = coco.reduce %5 kind = sum dims = [0, 1] : (!coco.tensor<128x32xf32, replicated>) -> !coco.tensor<f32, replicated>
    %7 = coco.add %4, %6 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %grad_norm = coco.sqrt %7 {name = "grad_norm"} : (!coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %8 = coco.constant 1.000000e+00 : !coco.tensor<f32, replicated>
    %9 = coco.constant 1.000000e+00 : !coco.tensor<f32, replicated>
    %10 = coco.constant 1.000000e-06 : !coco.tensor<f32, replicated>
    %11 = coco.add %grad_norm, %10 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %12 = coco.div %9, %11 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %clip = coco.min %8, %12 {name = "clip"} : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %13 = coco.constant 9.000000e-01 : !coco.tensor<f32, replicated>
    %14 = coco.constant 9.990000e-01 : !coco.tensor<f32, replicated>
    %15 = coco.constant 1.000000e-08 : !coco.tensor<f32, replicated>
    %16 = coco.constant 1.000000e-02 : !coco.tensor<f32, replicated>
    %17 = coco.mul %lr, %16 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %18 = coco.sub %8, %17 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %19 = coco.mul %embedding_grad, %clip : (!coco.tensor<256x64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %20 = coco.mul %13, %m_embedding : (!coco.tensor<f32, replicated>, !coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %21 = coco.sub %8, %13 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %22 = coco.mul %21, %19 : (!coco.tensor<f32, replicated>, !coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %23 = coco.add %20, %22 : (!coco.tensor<256x64xf32, replicated>, !coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %24 = coco.mul %14, %v_embedding : (!coco.tensor<f32, replicated>, !coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %25 = coco.sub %8, %14 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %26 = coco.mul %25, %19 : (!coco.tensor<f32, replicated>, !coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %27 = coco.mul %26, %19 : (!coco.tensor<256x64xf32, replicated>, !coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %28 = coco.add %24, %27 : (!coco.tensor<256x64xf32, replicated>, !coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %29 = coco.sub %8, %b1t : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %30 = coco.div %23, %29 : (!coco.tensor<256x64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %31 = coco.sub %8, %b2t : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %32 = coco.div %28, %31 : (!coco.tensor<256x64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %33 = coco.sqrt %32 : (!coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %34 = coco.add %33, %15 : (!coco.tensor<256x64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %35 = coco.div %30, %34 : (!coco.tensor<256x64xf32, replicated>, !coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %36 = coco.mul %w_embedding, %18 : (!coco.tensor<256x64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %37 = coco.mul %lr, %35 : (!coco.tensor<f32, replicated>, !coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    %38 = coco.sub %36, %37 : (!coco.tensor<256x64xf32, replicated>, !coco.tensor<256x64xf32, replicated>) -> !coco.tensor<256x64xf32, replicated>
    coco.update %w_embedding, %38 : !coco.tensor<256x64xf32, replicated>
    coco.update %m_embedding, %23 : !coco.tensor<256x64xf32, replicated>
    coco.update %v_embedding, %28 : !coco.tensor<256x64xf32, replicated>
    %39 = coco.mul %bias_grad, %clip : (!coco.tensor<64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<64xf32, replicated>
    %40 = coco.mul %13, %m_bias : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %41 = coco.sub %8, %13 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %42 = coco.mul %41, %39 : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %43 = coco.add %40, %42 : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %44 = coco.mul %14, %v_bias : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %45 = coco.sub %8, %14 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %46 = coco.mul %45, %39 : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %47 = coco.mul %46, %39 : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %48 = coco.add %44, %47 : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %49 = coco.sub %8, %b1t : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %50 = coco.div %43, %49 : (!coco.tensor<64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<64xf32, replicated>
    %51 = coco.sub %8, %b2t : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %52 = coco.div %48, %51 : (!coco.tensor<64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<64xf32, replicated>
    %53 = coco.sqrt %52 : (!coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %54 = coco.add %53, %15 : (!coco.tensor<64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<64xf32, replicated>
    %55 = coco.div %50, %54 : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %56 = coco.mul %w_bias, %18 : (!coco.tensor<64xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<64xf32, replicated>
    %57 = coco.mul %lr, %55 : (!coco.tensor<f32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    %58 = coco.sub %56, %57 : (!coco.tensor<64xf32, replicated>, !coco.tensor<64xf32, replicated>) -> !coco.tensor<64xf32, replicated>
    coco.update %w_bias, %58 : !coco.tensor<64xf32, replicated>
    coco.update %m_bias, %43 : !coco.tensor<64xf32, replicated>
    coco.update %v_bias, %48 : !coco.tensor<64xf32, replicated>
    %59 = coco.mul %projection_grad, %clip : (!coco.tensor<128x32xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %60 = coco.mul %13, %m_projection : (!coco.tensor<f32, replicated>, !coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %61 = coco.sub %8, %13 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %62 = coco.mul %61, %59 : (!coco.tensor<f32, replicated>, !coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %63 = coco.add %60, %62 : (!coco.tensor<128x32xf32, replicated>, !coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %64 = coco.mul %14, %v_projection : (!coco.tensor<f32, replicated>, !coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %65 = coco.sub %8, %14 : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %66 = coco.mul %65, %59 : (!coco.tensor<f32, replicated>, !coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %67 = coco.mul %66, %59 : (!coco.tensor<128x32xf32, replicated>, !coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %68 = coco.add %64, %67 : (!coco.tensor<128x32xf32, replicated>, !coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %69 = coco.sub %8, %b1t : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %70 = coco.div %63, %69 : (!coco.tensor<128x32xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %71 = coco.sub %8, %b2t : (!coco.tensor<f32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<f32, replicated>
    %72 = coco.div %68, %71 : (!coco.tensor<128x32xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %73 = coco.sqrt %72 : (!coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %74 = coco.add %73, %15 : (!coco.tensor<128x32xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %75 = coco.div %70, %74 : (!coco.tensor<128x32xf32, replicated>, !coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %76 = coco.mul %w_projection, %18 : (!coco.tensor<128x32xf32, replicated>, !coco.tensor<f32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %77 = coco.mul %lr, %75 : (!coco.tensor<f32, replicated>, !coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    %78 = coco.sub %76, %77 : (!coco.tensor<128x32xf32, replicated>, !coco.tensor<128x32xf32, replicated>) -> !coco.tensor<128x32xf32, replicated>
    coco.update %w_projection, %78 : !coco.tensor<128x32xf32, replicated>
    coco.update %m_projection, %63 : !coco.tensor<128x32xf32, replicated>
    coco.update %v_projection, %68 : !coco.tensor<128x32xf32, replicated>
    func.return
  }
}
