// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' | filecheck %s
// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=2}' | filecheck %s --check-prefix=TWO
// RUN: not coconet-opt %s -p 'convert-coco-to-gpu{world=2 fused_chunk=0}' 2>&1 | filecheck %s --check-prefix=CHUNK
// RUN: coconet-opt %s -p 'convert-coco-to-gpu{world=4}' -t cuda | filecheck %s --check-prefix=CUDA

// CHUNK: error: convert-coco-to-gpu: fused_chunk must be >= 1, got 0

// As CUDA C: the symmetric buffers peers write during the kernel are neither
// const nor __restrict__ (no non-coherent loads of them); the host entry draws
// the epoch and passes this rank's views of the symmetric workspace, the
// fusion's first signal slot and the dropout's seed.
// CUDA:       __global__ void {{.*}}layer_layer_fused_0(int64_t rank, int64_t epoch, coco_peers peers, int64_t slots, int64_t seed, const __half *__restrict__ input0, __half *scratch0, {{.*}}, __half *gather0, __half *__restrict__ gathered0, __half *__restrict__ slice0) {
// CUDA:         coco::store_vec(peer_view + {{.*}}, coco::load_vec<__half, 8>(input0 + {{.*}}));
// CUDA:         coco::count_peer_bytes(peers, peer, (unsigned long long)32);
// CUDA-NEXT:    coco::signal(coco::signal_slot(peers, peer, slots + rank), (uint64_t)epoch);
// CUDA:       extern "C" size_t coco_symmetric_bytes(void) { return 512; }
// CUDA:       extern "C" size_t coco_signal_slots(void) { return 8; }
// CUDA:       coco::next_epoch(ctx)
// CUDA:       COCO_LAUNCH(layer_layer_fused_0, {{.*}}, (int64_t)ctx->rank, epoch, coco::peers_of(ctx), 0, 7, x, coco::symmetric_buffer<__half>(ctx, 0), bias, r, coco::symmetric_buffer<__half>(ctx, 256), result0, result1);

// A fused all-reduce (reduce_scatter along an inner dim, compute with a
// broadcast bias, dropout and an all_slice'd residual, all_gather) becomes ONE
// kernel: no NCCL call, one launch, peer stores and signals (docs/gpu/fused.md, "The
// fused all-reduce kernel").

// CHECK:      builtin.module attributes {{{.*}}coco_gpu.symmetric_bytes = 512 : i64, coco_gpu.signal_slots = 8 : i64
// TWO:        builtin.module attributes {{{.*}}coco_gpu.symmetric_bytes = 512 : i64, coco_gpu.signal_slots = 4 : i64

// The kernel: rank, epoch, peers, the reduced input and its scratch, the
// inputs read per element, the gather buffer and the gathered output, the
// sliced output.
// CHECK:      gpu.func
// CHECK-NOT:  gpu.func
// CHECK:      %rank: index, %epoch: i64, %peers: {{.*}}, %slots: index, %seed: i64, %input0: memref<64xf16>, %scratch0: memref<64xf16>, %in1: memref<4xf16>, %in2: memref<64xf16>, %gather0: memref<64xf16>, %gathered0: memref<64xf16>, %slice0: memref<16xf16>
// CHECK:      %leader = arith.cmpi eq, %tid, %{{.*}} : index

// Whether every buffer moved by vectors starts at a multiple of 16 bytes (the
// bias %in1 is read by broadcast, element by element: not checked).
// CHECK:      memref.extract_aligned_pointer_as_index{{.*}}(%input0)
// CHECK-NOT:  (%in1)
// CHECK:      %aligned = arith.andi

// Phase 1: (peer, chunk) items; store into the peer's scratch — 8 halves
// (16 bytes) per access when aligned, else one — then thread 0 signals the
// peer.
// CHECK:      scf.for %item = %bid to %{{.*}} step %{{.*}} {
// CHECK:        %[[PEER:.*]] = arith.remui
// CHECK:        %[[SCRATCH:.*]] = coco_gpu.peer_view %peers, %scratch0, %[[PEER]] : memref<64xf16>
// CHECK:        scf.if %aligned {
// CHECK:          scf.for %v = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:            %[[V:.*]] = vector.load %input0[%{{.*}}] : memref<64xf16>, vector<8xf16>
// CHECK-NEXT:       vector.store %[[V]], %[[SCRATCH]][%{{.*}}] : memref<64xf16>, vector<8xf16>
// CHECK:        } else {
// CHECK:          scf.for %l = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:            %[[X:.*]] = memref.load %input0[%{{.*}}] : memref<64xf16>
// CHECK-NEXT:       memref.store %[[X]], %[[SCRATCH]][%{{.*}}] : memref<64xf16>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   {{"?}}gpu.barrier{{"?}}
// CHECK-NEXT:   scf.if %leader {
// CHECK:          coco_gpu.signal %peers, %[[PEER]], %{{.*}}, %epoch
// CHECK-NEXT:   }
// CHECK-NEXT: }

// Phase 2: per chunk of the own slice, thread 0 waits for every peer, the
// block reduces in rank order (halves in f32, a lane per accumulator),
// computes lane by lane, stores locally and into every peer's gather buffer,
// then thread 0 signals every peer.
// CHECK:      scf.for %chunk{{.*}} = %bid to %{{.*}} step %{{.*}} {
// CHECK-NEXT:   scf.if %leader {
// CHECK:          scf.for %k = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:            coco_gpu.wait_signal %peers, %{{.*}}, %epoch
// CHECK:        {{"?}}gpu.barrier{{"?}}
// CHECK:        scf.if %aligned {
// CHECK:          scf.for %q = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%acc = %{{.*}}, %acc_1 = {{.*}}, %acc_7 = %{{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK:            vector.load %scratch0[%{{.*}}] : memref<64xf16>, vector<8xf16>
// CHECK:            arith.addf %acc
// CHECK-COUNT-8:  arith.mului_extended
// CHECK:          vector.store %{{.*}}, %slice0[%{{.*}}] : memref<16xf16>, vector<8xf16>
// CHECK:          vector.store %[[OUT:.*]], %gathered0[%g] : memref<64xf16>, vector<8xf16>
// CHECK:          scf.for %k{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:            %[[GATHERV:.*]] = coco_gpu.peer_view %peers, %gather0, %{{.*}} : memref<64xf16>
// CHECK-NEXT:       vector.store %[[OUT]], %[[GATHERV]][%{{.*}}] : memref<64xf16>, vector<8xf16>
// CHECK:        } else {
// CHECK:          scf.for %q{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%acc{{.*}} = %{{.*}}) -> (f32) {
// CHECK:            memref.load %scratch0
// CHECK:            arith.addf %acc
// CHECK:          arith.mului_extended
// CHECK:          memref.store %{{.*}}, %slice0[%{{.*}}] : memref<16xf16>
// CHECK:          memref.store %{{.*}}, %gathered0[%g{{.*}}] : memref<64xf16>
// CHECK:          scf.for %k{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:            %[[GATHER:.*]] = coco_gpu.peer_view %peers, %gather0, %{{.*}} : memref<64xf16>
// CHECK-NEXT:       memref.store %{{.*}}, %[[GATHER]][%{{.*}}] : memref<64xf16>
// CHECK:        {{"?}}gpu.barrier{{"?}}
// CHECK-NEXT:   scf.if %leader {
// CHECK:          coco_gpu.signal %peers, %{{.*}}, %{{.*}}, %epoch

// Phase 3: wait for each peer's chunk (the closing sync), copy it out.
// CHECK:      scf.for %item{{.*}} = %bid to %{{.*}} step %{{.*}} {
// CHECK:        scf.if %leader {
// CHECK:          coco_gpu.wait_signal %peers, %{{.*}}, %epoch
// CHECK:        {{"?}}gpu.barrier{{"?}}
// CHECK:          vector.load %gather0
// CHECK-NEXT:     vector.store %{{.*}}, %gathered0
// CHECK:          memref.load %gather0
// CHECK-NEXT:     memref.store %{{.*}}, %gathered0
// CHECK-NOT:  coco_gpu.signal
// CHECK-NOT:  coco_gpu.wait_signal
// CHECK-NOT:  gpu.func

// The host: one epoch, two symmetric buffers, one launch, no NCCL.
// CHECK-LABEL: func.func @layer(
// CHECK-NOT:   coco_gpu.nccl
// CHECK:       %blocks = coco_gpu.grid_blocks
// CHECK:       %epoch = coco_gpu.next_epoch
// CHECK:       coco_gpu.symmetric_buffer offset = 0 : memref<64xf16>
// CHECK:       coco_gpu.symmetric_buffer offset = 256 : memref<64xf16>
// CHECK:       @kernels::@layer_layer_fused_0 blocks in (%blocks{{.*}} args(%rank : index, %epoch : i64, %peers : !coco_gpu.peers, %c0 : index, %c7_i64 : i64, %x_flat
// CHECK-NOT:   coco_gpu.nccl
// CHECK-NOT:   launch_func
// CHECK:       func.return

func.func @layer(%x: !coco.tensor<2x8x4xf16, local>, %bias: !coco.tensor<4xf16, replicated>, %r: !coco.tensor<2x8x4xf16, replicated>) -> (!coco.tensor<2x8x4xf16, replicated>, !coco.tensor<2x8x4xf16, sliced<1>>) {
  %out, %biased = coco.fusion (%x, %bias, %r) {name = "layer_fused"} : (!coco.tensor<2x8x4xf16, local>, !coco.tensor<4xf16, replicated>, !coco.tensor<2x8x4xf16, replicated>) -> (!coco.tensor<2x8x4xf16, replicated>, !coco.tensor<2x8x4xf16, sliced<1>>) {
  ^bb0(%x1: !coco.tensor<2x8x4xf16, local>, %bias1: !coco.tensor<4xf16, replicated>, %r1: !coco.tensor<2x8x4xf16, replicated>):
    %sum = coco.reduce_scatter %x1 reduction = sum dim = 1 : !coco.tensor<2x8x4xf16, local> -> !coco.tensor<2x8x4xf16, sliced<1>>
    %b = coco.add %sum, %bias1 : (!coco.tensor<2x8x4xf16, sliced<1>>, !coco.tensor<4xf16, replicated>) -> !coco.tensor<2x8x4xf16, sliced<1>>
    %d = coco.dropout %b p = 1.000000e-01 seed = 7 : (!coco.tensor<2x8x4xf16, sliced<1>>) -> !coco.tensor<2x8x4xf16, sliced<1>>
    %rs = coco.all_slice %r1 dim = 1 : (!coco.tensor<2x8x4xf16, replicated>) -> !coco.tensor<2x8x4xf16, sliced<1>>
    %o = coco.add %d, %rs : (!coco.tensor<2x8x4xf16, sliced<1>>, !coco.tensor<2x8x4xf16, sliced<1>>) -> !coco.tensor<2x8x4xf16, sliced<1>>
    %g = coco.all_gather %o : !coco.tensor<2x8x4xf16, sliced<1>> -> !coco.tensor<2x8x4xf16, replicated>
    coco.yield %g, %b : !coco.tensor<2x8x4xf16, replicated>, !coco.tensor<2x8x4xf16, sliced<1>>
  }
  func.return %out, %biased : !coco.tensor<2x8x4xf16, replicated>, !coco.tensor<2x8x4xf16, sliced<1>>
}
