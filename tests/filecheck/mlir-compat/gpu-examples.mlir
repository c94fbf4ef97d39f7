// REQUIRES: mlir-opt, ptxas
// Every example, lowered at world 4 as written and after coco-optimize: the
// generic form of the device level parses in mlir-opt 22 (coco_gpu as an
// unregistered dialect), and all its kernels — every one is upstream-only —
// go through mlir-opt's NVVM pipeline to PTX that ptxas -arch=sm_90 assembles.
// DEFINE: %{nvvm} = %mlir-opt --pass-pipeline='builtin.module(nvvm-attach-target{chip=sm_90},gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm),reconcile-unrealized-casts,gpu-module-to-binary{format=isa toolkit=%cuda-toolkit})'
// DEFINE: %{ptx} = python -m coconet_ir.backend.cuda.mlir_interop ptx
// DEFINE: %{examples} = %S/../../../examples

// RUN: coconet-opt %{examples}/sgd.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/sgd.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/adam.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/adam.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/lamb.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/lamb.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/megatron.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/megatron.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/pipeline.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/pipeline.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/matmul_reduce_scatter.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/matmul_reduce_scatter.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/sequence_parallel.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/sequence_parallel.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/dlrm_embedding.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/dlrm_embedding.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/gemv_allreduce.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/gemv_allreduce.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/moe_gemm_a2a.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/moe_gemm_a2a.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/sequence_parallel_mlp.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/sequence_parallel_mlp.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/sequence_parallel_norm.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/sequence_parallel_norm.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/sequence_parallel_rmsnorm.mlir -p 'convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null
// RUN: coconet-opt %{examples}/sequence_parallel_rmsnorm.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' --print-op-generic | %mlir-opt --allow-unregistered-dialect -o /dev/null

// RUN: coconet-opt %{examples}/sgd.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.sgd.ptx
// RUN: coconet-opt %{examples}/adam.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.adam.ptx
// RUN: coconet-opt %{examples}/lamb.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.lamb.ptx
// RUN: coconet-opt %{examples}/megatron.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.megatron.ptx
// RUN: coconet-opt %{examples}/pipeline.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.pipeline.ptx
// RUN: coconet-opt %{examples}/matmul_reduce_scatter.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.mrs.ptx
// RUN: coconet-opt %{examples}/sequence_parallel.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.sp.ptx
// RUN: coconet-opt %{examples}/lamb.mlir -p 'convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.lamb0.ptx
// RUN: coconet-opt %{examples}/pipeline.mlir -p 'convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.pipeline0.ptx
// RUN: coconet-opt %{examples}/dlrm_embedding.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.dlrm.ptx
// RUN: coconet-opt %{examples}/dlrm_embedding.mlir -p 'convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.dlrm0.ptx
// RUN: coconet-opt %{examples}/gemv_allreduce.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.gemv.ptx
// RUN: coconet-opt %{examples}/gemv_allreduce.mlir -p 'convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.gemv0.ptx
// RUN: coconet-opt %{examples}/sequence_parallel_mlp.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.spmlp.ptx
// RUN: coconet-opt %{examples}/sequence_parallel_mlp.mlir -p 'convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.spmlp0.ptx
// RUN: coconet-opt %{examples}/sequence_parallel_norm.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.spnorm.ptx
// RUN: coconet-opt %{examples}/sequence_parallel_rmsnorm.mlir -p 'coco-optimize,convert-coco-to-gpu{world=4}' -t upstream-kernels | %{nvvm} | %{ptx} > %t.sprms.ptx
// RUN: %ptxas -arch=sm_90 %t.sgd.ptx -o %t.sgd.cubin
// RUN: %ptxas -arch=sm_90 %t.adam.ptx -o %t.adam.cubin
// RUN: %ptxas -arch=sm_90 %t.lamb.ptx -o %t.lamb.cubin
// RUN: %ptxas -arch=sm_90 %t.megatron.ptx -o %t.megatron.cubin
// RUN: %ptxas -arch=sm_90 %t.pipeline.ptx -o %t.pipeline.cubin
// RUN: %ptxas -arch=sm_90 %t.mrs.ptx -o %t.mrs.cubin
// RUN: %ptxas -arch=sm_90 %t.sp.ptx -o %t.sp.cubin
// RUN: %ptxas -arch=sm_90 %t.lamb0.ptx -o %t.lamb0.cubin
// RUN: %ptxas -arch=sm_90 %t.pipeline0.ptx -o %t.pipeline0.cubin
// RUN: %ptxas -arch=sm_90 %t.dlrm.ptx -o %t.dlrm.cubin
// RUN: %ptxas -arch=sm_90 %t.dlrm0.ptx -o %t.dlrm0.cubin
// RUN: %ptxas -arch=sm_90 %t.gemv.ptx -o %t.gemv.cubin
// RUN: %ptxas -arch=sm_90 %t.gemv0.ptx -o %t.gemv0.cubin
// RUN: %ptxas -arch=sm_90 %t.spnorm.ptx -o %t.spnorm.cubin
// RUN: %ptxas -arch=sm_90 %t.sprms.ptx -o %t.sprms.cubin
// RUN: %ptxas -arch=sm_90 %t.spmlp.ptx -o %t.spmlp.cubin
// RUN: %ptxas -arch=sm_90 %t.spmlp0.ptx -o %t.spmlp0.cubin
