//! Timings of the tensor operations that dominate the three jobs' steps on the CPU backend, to
//! see where a step's time goes. `cargo bench --bench ops` (RAYON_NUM_THREADS=1 for one thread).

use burn::backend::Flex;
use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::activation::{relu, tanh};
use std::time::Instant;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type B = Flex;

/// Median microseconds of `f` over `reps` runs after a warm-up, printed and returned.
fn time<T>(name: &str, reps: usize, mut f: impl FnMut() -> T) -> f64 {
    for _ in 0..reps / 5 + 1 {
        std::hint::black_box(f());
    }
    let mut us: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    us.sort_by(f64::total_cmp);
    println!("{name:<48} {:>9.1} us", us[reps / 2]);
    us[reps / 2]
}

fn rand(shape: [usize; 2]) -> Tensor<B, 2> {
    Tensor::random(shape, Distribution::Uniform(-1.0, 1.0), &Default::default())
}

/// A strided operand: first element, row stride, column stride.
type View = (*const f32, isize, isize);
/// A named product `[m, k] · [k, n]`: its name, (m, n, k) and its two operands.
type Product = (&'static str, (usize, usize, usize), View, View);

/// `dst [m, n] = lhs · rhs` on one thread with the `gemm` crate (ember's default kernel), with
/// `dst`'s rows `dst_rs` elements apart.
///
/// # Safety
/// The views address m x k and k x n elements of live buffers; `dst` addresses m rows of n
/// writable elements.
unsafe fn product_gemm_crate(
    (m, n, k): (usize, usize, usize),
    lhs: View,
    rhs: View,
    (dst, dst_rs): (*mut f32, isize),
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs,
            false,
            lhs.0,
            lhs.2,
            lhs.1,
            rhs.0,
            rhs.2,
            rhs.1,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

/// A gemm of `[m, k] x [k, n]` (row-major) into `out`, split over `parts` column blocks run on
/// rayon's pool, each block single-threaded.
fn gemm_split(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], out: &mut [f32], parts: usize) {
    use rayon::prelude::*;
    let cols = n.div_ceil(parts);
    let (out_ptr, b_ptr) = (out.as_mut_ptr() as usize, b.as_ptr() as usize);
    let lhs = (a.as_ptr() as usize, k as isize, 1);
    (0..parts).into_par_iter().for_each(|p| {
        let c0 = p * cols;
        let nc = cols.min(n - c0);
        // SAFETY: column block c0..c0 + nc of b and of out, inside both buffers; the blocks
        // are disjoint.
        unsafe {
            let rhs = ((b_ptr as *const f32).add(c0), n as isize, 1);
            let dst = ((out_ptr as *mut f32).add(c0), n as isize);
            product_gemm_crate((m, nc, k), (lhs.0 as *const f32, lhs.1, lhs.2), rhs, dst);
        }
    });
}

/// fashion-mlp's five large products with the `gemm` crate on one thread, with GFLOP/s (to
/// compare with `cargo bench --bench peak`).
fn fashion_products(reps: usize) {
    let data =
        |len: usize| -> Vec<f32> { (0..len).map(|i| (i % 17) as f32 * 0.05 - 0.4).collect() };
    let (x, h, g) = (data(64 * 784), data(64 * 512), data(64 * 512));
    let (w1, w2) = (data(784 * 512), data(512 * 512));
    let row = |v: &Vec<f32>, cols: usize| (v.as_ptr(), cols as isize, 1);
    let transposed = |v: &Vec<f32>, cols: usize| (v.as_ptr(), 1, cols as isize);
    let shapes: [Product; 5] = [
        (
            "forward [64,784]x[784,512]",
            (64, 512, 784),
            row(&x, 784),
            row(&w1, 512),
        ),
        (
            "forward [64,512]x[512,512]",
            (64, 512, 512),
            row(&h, 512),
            row(&w2, 512),
        ),
        (
            "dW x^T [784,64]x[64,512]",
            (784, 512, 64),
            transposed(&x, 784),
            row(&g, 512),
        ),
        (
            "dW h^T [512,64]x[64,512]",
            (512, 512, 64),
            transposed(&h, 512),
            row(&g, 512),
        ),
        (
            "dx g [64,512]x w2^T",
            (64, 512, 512),
            row(&g, 512),
            transposed(&w2, 512),
        ),
    ];
    let mut out = vec![0f32; 784 * 512];
    for (name, dims, lhs, rhs) in shapes {
        let flops = 2.0 * (dims.0 * dims.1 * dims.2) as f64;
        let dst = (out.as_mut_ptr(), dims.1 as isize);
        // SAFETY: the views address the live vectors above; out holds the largest m * n.
        let us = time(name, reps, || unsafe {
            product_gemm_crate(dims, lhs, rhs, dst)
        });
        println!("{:<48} {:>9.1} GFLOP/s", "", flops / us / 1e3);
    }
}

/// The checked job of `configs/{name}.toml`.
fn preset(name: &str) -> ember::config::JobConfig {
    let path = std::path::PathBuf::from(format!("configs/{name}.toml"));
    let text = std::fs::read_to_string(&path).expect("a preset's config");
    ember::config::parse(&path, &text)
        .and_then(|raw| raw.check())
        .expect("a valid preset")
}

/// A batch of 64 random 28x28 images (as rows of 784) with classes 0 to 9 in turn.
fn fashion_batch<A: burn::tensor::backend::Backend>(
    device: &A::Device,
) -> ember::model::mlp::MlpBatch<A> {
    use ember::model::mlp::Targets;
    let classes = TensorData::new((0..64).map(|i| (i % 10) as i64).collect::<Vec<_>>(), [64]);
    ember::model::mlp::MlpBatch {
        inputs: Tensor::random([64, 784], Distribution::Uniform(0.0, 1.0), device),
        targets: Targets::Classes(Tensor::from_data(classes, device)),
    }
}

/// The fashion-mlp step in its parts: forward, forward + backward, and the whole step with
/// the SGD update, each timed on its own.
fn fashion_step_parts(reps: usize) {
    use burn::backend::Autodiff;
    use burn::optim::{Optimizer, SgdConfig};
    use burn::train::TrainStep;
    use ember::model::mlp::Mlp;
    type A = Autodiff<Flex>;
    let device = Default::default();
    let model = Mlp::<A>::new(&preset("fashion-mlp"), 784, 10, &device);
    let batch = fashion_batch::<A>(&device);
    time("fashion forward", reps, || {
        model.forward(batch.inputs.clone())
    });
    time("fashion forward + backward (TrainStep)", reps, || {
        TrainStep::step(&model, batch.clone())
    });
    let mut optim = SgdConfig::new().init::<A, Mlp<A>>();
    let mut m = Some(model.clone());
    time("fashion step: forward + backward + SGD", reps, || {
        let model = m.take().unwrap();
        let out = TrainStep::step(&model, batch.clone());
        m = Some(optim.step(1e-3, model, out.grads));
    });
}

/// conv2's three products (fashion-cnn's second convolution: 64 channels of 3x3 over 32, on
/// 14x14 maps, batch 64) on one thread, an image at a time against `images` at a time (their
/// columns side by side), with GFLOP/s: how much a product's size is worth to the gemm crate.
fn cnn_products(reps: usize) {
    let data =
        |len: usize| -> Vec<f32> { (0..len).map(|i| (i % 17) as f32 * 0.05 - 0.4).collect() };
    let (cout, patch, pixels, batch) = (64, 288, 196, 64);
    for images in [1, 4, 8, 16] {
        let cols = images * pixels;
        let (w, col, dz) = (data(cout * patch), data(patch * cols), data(cout * cols));
        let row = |v: &Vec<f32>, c: usize| (v.as_ptr(), c as isize, 1);
        let transposed = |v: &Vec<f32>, c: usize| (v.as_ptr(), 1, c as isize);
        let shapes: [Product; 3] = [
            (
                "forward W·col",
                (cout, cols, patch),
                row(&w, patch),
                row(&col, cols),
            ),
            (
                "dW dz·colT",
                (cout, patch, cols),
                row(&dz, cols),
                transposed(&col, cols),
            ),
            (
                "dcol WT·dz",
                (patch, cols, cout),
                transposed(&w, patch),
                row(&dz, cols),
            ),
        ];
        let mut out = vec![0f32; patch * cols];
        for (name, dims, lhs, rhs) in shapes {
            let dst = (out.as_mut_ptr(), dims.1 as isize);
            let calls = batch / images;
            // SAFETY: the views address the live vectors above; out holds the largest m * n.
            let us = time(
                &format!("conv2 {name}, {images} images a product"),
                reps,
                || {
                    for _ in 0..calls {
                        unsafe { product_gemm_crate(dims, lhs, rhs, dst) }
                    }
                },
            );
            let flops = 2.0 * (cout * patch * pixels * batch) as f64;
            println!("{:<48} {:>9.1} GFLOP/s", "", flops / us / 1e3);
        }
    }
}

/// The fashion-cnn step's operations on the CPU backend at the preset's shapes (batch 64,
/// 3x3 convolutions with padding 1, batch norm, ReLU, 2x2 max-pool), each timed on its own,
/// then the whole forward + backward of the preset's network.
fn cnn_step_parts(reps: usize) {
    use burn::backend::Autodiff;
    use burn::train::TrainStep;
    use ember::model::cnn::Cnn;
    use ember::ops::EmberBackend;
    let d = Default::default();
    let rand4 = |s: [usize; 4]| Tensor::<B, 4>::random(s, Distribution::Uniform(-1.0, 1.0), &d);
    let prim = |t: &Tensor<B, 4>| t.clone().into_primitive().tensor();
    for (name, cin, side, cout) in [("conv1", 1, 28, 32), ("conv2", 32, 14, 64)] {
        let (x, w) = (rand4([64, cin, side, side]), rand4([cout, cin, 3, 3]));
        let g = rand4([64, cout, side, side]);
        time(
            &format!("{name} forward [64,{cin},{side},{side}]"),
            reps,
            || B::conv(prim(&x), prim(&w), None, (1, 1)),
        );
        time(&format!("{name} backward (dx: {})", cin > 1), reps, || {
            B::conv_backward(prim(&x), prim(&w), prim(&g), (1, 1), (cin > 1, false))
        });
        let flat = |t: &Tensor<B, 4>| {
            let t: Tensor<B, 3> = t.clone().reshape([64, cout, side * side]);
            t.into_primitive().tensor()
        };
        let ones = Tensor::<B, 1>::ones([cout], &d).into_primitive().tensor();
        let zeros = Tensor::<B, 1>::zeros([cout], &d).into_primitive().tensor();
        let (_, mean, var) = B::batch_norm(flat(&g), ones.clone(), zeros.clone(), 1e-5);
        time(&format!("{name} batch norm forward"), reps, || {
            B::batch_norm(flat(&g), ones.clone(), zeros.clone(), 1e-5)
        });
        time(&format!("{name} batch norm backward"), reps, || {
            B::batch_norm_backward(
                flat(&g),
                ones.clone(),
                mean.clone(),
                var.clone(),
                1e-5,
                flat(&g),
            )
        });
        time(&format!("{name} relu"), reps, || relu(g.clone()));
        time(&format!("{name} max-pool forward"), reps, || {
            B::max_pool(prim(&g), 2)
        });
        let pooled = rand4([64, cout, side / 2, side / 2]);
        time(&format!("{name} max-pool backward"), reps, || {
            B::max_pool_backward(prim(&g), 2, prim(&pooled), None)
        });
    }
    type A = Autodiff<Flex>;
    let mut config = preset("fashion-cnn");
    config.model.image = Some([1, 28, 28]);
    let model = Cnn::<A>::new(&config, 10, &d);
    let batch = fashion_batch::<A>(&d);
    time(
        "fashion-cnn forward + backward (TrainStep)",
        reps / 4,
        || TrainStep::step(&model, batch.clone()),
    );
}

fn main() {
    // As the ember binary does: freed memory is kept, so a timing does not fault its pages in.
    ember::allocator::keep_freed_memory();
    ember::allocator::small_pages();
    println!("threads: {}", rayon::current_num_threads());
    // `cargo bench --bench ops -- cnn`: the CNN's parts only.
    if std::env::args().any(|a| a == "cnn") {
        cnn_products(30);
        cnn_step_parts(100);
        return;
    }
    fashion_products(300);
    fashion_step_parts(200);
    let x = rand([64, 784]);
    let w1 = rand([784, 512]);
    let w2 = rand([512, 512]);
    let h = rand([64, 512]);
    let g = rand([64, 512]);
    let reps = 300;
    // fashion-mlp forward
    time("matmul [64,784]x[784,512]", reps, || {
        x.clone().matmul(w1.clone())
    });
    time("matmul [64,512]x[512,512]", reps, || {
        h.clone().matmul(w2.clone())
    });
    // fashion-mlp backward: weight gradient and input gradient
    time("matmul x^T [784,64]x[64,512]", reps, || {
        x.clone().transpose().matmul(g.clone())
    });
    time("matmul g [64,512]x w2^T [512,512]", reps, || {
        g.clone().matmul(w2.clone().transpose())
    });
    time("relu [64,512]", reps, || relu(h.clone()));
    time("sgd update [784,512]: w - g*lr", reps, || {
        w1.clone() - w1.clone().mul_scalar(1e-3)
    });
    // The same first-layer product with gemm directly, whole and split by columns.
    let xa: Vec<f32> = x.clone().into_data().to_vec().unwrap();
    let wa: Vec<f32> = w1.clone().into_data().to_vec().unwrap();
    let mut out = vec![0f32; 64 * 512];
    for parts in [1, 2, 4] {
        time(
            &format!("gemm [64,784]x[784,512] in {parts} column blocks"),
            reps,
            || gemm_split(64, 784, 512, &xa, &wa, &mut out, parts),
        );
    }
    // tabular-mlp
    let t = rand([2048, 61]);
    let tw = rand([61, 20]);
    let th = rand([2048, 20]);
    time("matmul [2048,61]x[61,20]", reps, || {
        t.clone().matmul(tw.clone())
    });
    time("matmul t^T [61,2048]x[2048,20]", reps, || {
        t.clone().transpose().matmul(th.clone())
    });
    time("burn tanh [2048,20]", reps, || tanh(th.clone()));
    time("ember tanh [2048,20]", reps, || {
        ember::ops::tanh(th.clone())
    });
    time("add [2048,20]+[1,20] (bias)", reps, || {
        th.clone() + tw.clone().slice([0..1, 0..20])
    });
}
