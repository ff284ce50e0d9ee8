//! A small layer's backward by chunks of the batch's rows, with FMA (AVX2 or AVX-512) and two or
//! more threads: tabular-mlp's two hidden layers (`[2048 x 61] · [61 x 20]`,
//! `[2048 x 20] · [20 x 10]`).
//!
//! The weight gradient `dw = xᵀ · dz` is summed in `long_sums`' chunks of 512 rows. Here the
//! chunks are shared among the pool's threads in contiguous groups, and a group's thread
//! first computes its chunks' rows of dz (the activation's derivative) and, where the layer
//! needs it, of `dx = dz · wᵀ` ([`short_sums`]), then sums its chunks from the rows it has just
//! written. The rows of y and x it reads are mostly the ones the forward's row blocks left in
//! its core's cache. The whole layer's path (`linear_layer::linear_backward`) ran the derivative over
//! the pool, then dw's chunks, then dx (or dx and dw side by side, one thread each), then the
//! bias sums on one thread, each reading about half its rows from the other core.
//!
//! The bits are the whole layer's: the derivative is element-wise; each element of dx is one
//! chain over its row of dz, as `short_sums` computes it however the rows are cut; dw's chunks
//! are the ones `long_sums` sums from zero, added in the same order ([`long_sums::add_chunks`]).
//! The bias gradient is one chain of adds down each column ([`column_sums`]), carried from
//! group to group in the order of the rows.
//!
//! Measured side by side on a 2-core Xeon with AVX-512 (family 6 model 167), tabular-mlp at two
//! threads, against the whole layer's path: 1.06x with the bias sums after the groups on one
//! thread, 1.15x with them carried from group to group (6 rounds each).

use super::{
    contiguous::contiguous, contiguous::owned_contiguous, elementwise::GradPass,
    elementwise::column_sums, elementwise::derivative, view::LayerDims, view::SendPtr,
    view::SendView, view::View, view::assume_init, view::dims, view::tensor, view::uninit,
    view::view,
};
use super::{long_sums, short_sums};
use burn::backend::flex::FlexTensor;
use std::ops::Range;
use std::sync::OnceLock;

/// Whether a layer with a batch of `m` rows, `k` inputs and `n` outputs, its input `x` and its
/// weight `w` as they stand, takes [`backward`] on `threads`: where the whole layer's path would
/// sum dw by `long_sums`' chunks (with the same bits on one thread or many) and dx (when
/// needed) by `short_sums`, whole and chunk by chunk, and the products are worth a pool's
/// blocks of rows (`products::ROW_BLOCK_WORK`): smaller ones stay on one thread.
pub(super) fn applies(
    layer: LayerDims,
    (x, w): (View, View),
    need_dx: bool,
    threads: usize,
) -> bool {
    let dz = (std::ptr::null(), layer.outputs as isize, 1);
    let (xp, x_rs, x_cs) = x;
    let x_t = (xp, x_cs, x_rs);
    let worth = layer.forward().work() >= super::products::ROW_BLOCK_WORK;
    worth
        && long_sums::takes_chunks(layer.weight_grad(), (x_t, dz), threads)
        && (!need_dx || dx_by_rows(layer, w))
}

/// Whether `dx [m, k] = dz [m, n] · wᵀ` takes `short_sums` on the whole batch, as `input_grad`
/// computes it (`gemm_into`'s earlier kernels never take such a shape: `vector_products` needs
/// a sum of one term or one output column, `long_sums` a long sum), and on each chunk, the last
/// and shortest included.
fn dx_by_rows(layer: LayerDims, (wp, w_rs, w_cs): View) -> bool {
    let (m, n) = (layer.batch, layer.outputs);
    let operands = ((std::ptr::null(), n as isize, 1), (wp, w_cs, w_rs));
    let last = m - (m - 1) / long_sums::CHUNK * long_sums::CHUNK;
    [m, long_sums::CHUNK.min(m), last].into_iter().all(|batch| {
        let rows = LayerDims { batch, ..layer };
        short_sums::applies(rows.input_grad(), operands)
    })
}

/// The gradients of `act(x · w + b)` from x `[m, k]`, w `[k, n]`, the output y and its gradient
/// `grad`, by chunks of rows: [`applies`] must hold (it panics otherwise).
pub(super) fn backward(
    x: FlexTensor,
    w: FlexTensor,
    y: FlexTensor,
    grad: FlexTensor,
    act: super::Activation,
    need_dx: bool,
) -> super::LinearGrads<burn::backend::Flex> {
    let ((m, n), (_, k)) = (dims(&grad), dims(&x));
    let threads = rayon::current_num_threads();
    let sizes = LayerDims {
        batch: m,
        inputs: k,
        outputs: n,
    };
    assert!(
        applies(sizes, (view(&x), view(&w)), need_dx, threads),
        "a [{m} x {k}] · [{k} x {n}] layer's backward by chunks on {threads} threads"
    );
    let mut dz = owned_contiguous(grad);
    let (y, y_range) = contiguous(y, m * n);
    let mut dx = need_dx.then(|| uninit(m * k));
    let (xp, x_rs, x_cs) = view(&x);
    let (wp, w_rs, w_cs) = view(&w);
    let layer = Layer {
        dims: sizes,
        dz: SendPtr(dz.storage_mut::<f32>()[..m * n].as_mut_ptr()),
        y: &y.storage::<f32>()[y_range],
        pass: derivative(act),
        dx: dx.as_mut().map(|dx| SendPtr(dx.as_mut_ptr().cast())),
        x_t: SendView((xp, x_cs, x_rs)),
        w_t: SendView((wp, w_cs, w_rs)),
    };
    let chunks = m.div_ceil(long_sums::CHUNK);
    let groups = threads.min(chunks);
    let mut partials = vec![0f32; chunks * k * n];
    let db: Vec<Carried> = (0..groups).map(|_| OnceLock::new()).collect();
    layer.groups_from(0, groups, &mut partials, &db);
    let mut dw = uninit(k * n);
    // SAFETY: dw holds k x n elements, which chunk 0 writes whole (keep false).
    unsafe { long_sums::add_chunks(dw.as_mut_ptr().cast(), (k, n), false, &partials) };
    super::LinearGrads {
        // SAFETY: the groups wrote every row of dx, and add_chunks every element of dw.
        dx: dx.map(|dx| tensor(unsafe { assume_init(dx) }, m, k)),
        dw: tensor(unsafe { assume_init(dw) }, k, n),
        db: FlexTensor::from_data(burn::tensor::TensorData::new(
            db[groups - 1].wait_for(),
            [n],
        )),
    }
}

/// A layer's backward as [`backward`] shares it among groups of chunks.
struct Layer<'a> {
    /// x is `batch x inputs`, w `inputs x outputs`.
    dims: LayerDims,
    /// The output's gradient, which becomes dz in place (`m x n`, rows).
    dz: SendPtr,
    /// The layer's output (`m x n`, rows), for the activation's derivative.
    y: &'a [f32],
    pass: Option<GradPass>,
    /// dx (`m x k`, rows), where it is needed.
    dx: Option<SendPtr>,
    x_t: SendView,
    w_t: SendView,
}

impl Layer<'_> {
    /// Groups `g..groups` of the chunks, each on a thread of its own where the pool has one:
    /// group g on this thread, the rest beside it. `partials` holds their chunks' sums of dw,
    /// and `db[g]` receives the bias gradient's sums through group g's rows.
    ///
    /// Group g waits for `db[g - 1]` before adding its rows: the sums run down the rows in
    /// order, as [`column_sums`] runs them over the whole batch, so each group adds the rows
    /// that lie in its core's cache. The wait cannot deadlock: group g - 1 is the first half of
    /// the join that made group g's task, so it is running or done by then, and it waits only
    /// for groups before it. That holds as long as nothing in a group calls on the pool (each
    /// group's kernels run on its own thread): a group's thread could otherwise take up group
    /// g + 1 under group g, and wait for itself.
    fn groups_from(&self, g: usize, groups: usize, partials: &mut [f32], db: &[Carried]) {
        let LayerDims {
            batch: m,
            inputs: k,
            outputs: n,
        } = self.dims;
        let chunks = m.div_ceil(long_sums::CHUNK);
        let (first, end) = (g * chunks / groups, (g + 1) * chunks / groups);
        let (mine, rest) = partials.split_at_mut((end - first) * k * n);
        if g + 1 == groups {
            return self.group(first..end, mine, db, g);
        }
        rayon::join(
            || self.group(first..end, mine, db, g),
            || self.groups_from(g + 1, groups, rest, db),
        );
    }

    /// Chunks `chunks` (group g): their rows of dz and dx, their sums of dw into `sums`, then
    /// the bias gradient's sums carried on through their rows into `db[g]`.
    fn group(&self, chunks: Range<usize>, sums: &mut [f32], db: &[Carried], g: usize) {
        let _poison = Poison(&db[g]);
        let LayerDims {
            batch: m,
            inputs: k,
            outputs: n,
        } = self.dims;
        let rows = chunks.start * long_sums::CHUNK..m.min(chunks.end * long_sums::CHUNK);
        for (c, sums) in chunks.zip(sums.chunks_mut(k * n)) {
            let start = c * long_sums::CHUNK;
            self.rows(start..m.min(start + long_sums::CHUNK));
            let dz = (self.dz.get().cast_const(), n as isize, 1);
            // SAFETY: `applies` holds; these rows of dz were written just above.
            unsafe {
                long_sums::chunk_into(sums, self.dims.weight_grad(), c, (self.x_t.get(), dz))
            };
        }
        let mut sums = match g {
            0 => vec![0f32; n],
            _ => db[g - 1].wait_for(),
        };
        // SAFETY: this group's rows of dz, written above by this thread.
        let dz = unsafe {
            std::slice::from_raw_parts(self.dz.get().add(rows.start * n), rows.len() * n)
        };
        column_sums(&mut sums, dz);
        db[g]
            .set(Some(sums))
            .expect("each group sets its sums once");
    }

    /// Rows `r` of dz (the derivative, in place) and of dx.
    fn rows(&self, r: Range<usize>) {
        let (k, n) = (self.dims.inputs, self.dims.outputs);
        // SAFETY: dz holds m x n elements; each chunk's rows are written and read by its own
        // group alone.
        let dz =
            unsafe { std::slice::from_raw_parts_mut(self.dz.get().add(r.start * n), r.len() * n) };
        if let Some(pass) = self.pass {
            pass(dz, &self.y[r.start * n..r.end * n]);
        }
        if let Some(dx) = &self.dx {
            let operands = ((dz.as_ptr(), n as isize, 1), self.w_t.get());
            // SAFETY: `applies` holds for these rows (`dx_by_rows`); dx holds m x k elements,
            // these rows' written by this group alone.
            unsafe {
                let dst = (dx.get().add(r.start * k), k);
                let rows = LayerDims {
                    batch: r.len(),
                    ..self.dims
                };
                short_sums::product_into(dst, rows.input_grad(), false, operands, false);
            }
        }
    }
}

/// A group's bias sums through its rows, once it has added them; `None` where it panicked.
type Carried = OnceLock<Option<Vec<f32>>>;

/// Marks a group's sums as never coming, unless it set them: dropped in a panic, it lets the
/// next group, which waits for them, panic too rather than wait for ever (`rayon::join` waits
/// for both halves before it passes a panic on).
struct Poison<'a>(&'a Carried);

impl Drop for Poison<'_> {
    fn drop(&mut self) {
        // Ignored where the group set its sums.
        let _ = self.0.set(None);
    }
}

/// A value another thread sets.
trait WaitFor {
    /// The value once set, spinning until then (yielding after a while, for a pool with more
    /// threads than cores); a panic where the group that sets it panicked.
    fn wait_for(&self) -> Vec<f32>;
}

impl WaitFor for Carried {
    fn wait_for(&self) -> Vec<f32> {
        let mut spins = 0;
        loop {
            match self.get() {
                Some(Some(sums)) => return sums.clone(),
                Some(None) => panic!("a group of a layer's backward before this one panicked"),
                None if spins < 4096 => {
                    spins += 1;
                    std::hint::spin_loop();
                }
                None => std::thread::yield_now(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Activation;
    use crate::ops::kernel_tests::{salted_values, same_bits};
    use crate::ops::simd::{Simd, detected};
    use crate::ops::{contiguous::values, linear_layer::linear_backward};

    /// A layer's sizes as the tables list them, `(m, k, n)`: a batch of m rows, k inputs, n
    /// outputs.
    fn layer((batch, inputs, outputs): (usize, usize, usize)) -> LayerDims {
        LayerDims {
            batch,
            inputs,
            outputs,
        }
    }

    /// dx (when asked for), dw and db of a `[m x k] · [k x n]` layer through
    /// `linear_layer::linear_backward` on `threads`, w in rows or as the view of a transpose
    /// (`w_columns`), and whether that took the chunks.
    fn gradients(
        threads: usize,
        (m, k, n): (usize, usize, usize),
        act: Activation,
        (need_dx, w_columns): (bool, bool),
    ) -> (Vec<Vec<f32>>, bool) {
        use burn::tensor::ops::FloatTensorOps;
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
        pool.unwrap().install(|| {
            let x = tensor(salted_values(m * k, 1), m, k);
            let w = match w_columns {
                false => tensor(salted_values(k * n, 2), k, n),
                true => burn::backend::Flex::float_swap_dims(
                    tensor(salted_values(k * n, 2), n, k),
                    0,
                    1,
                ),
            };
            // An output in (-1, 1), as tanh's, and the gradient arriving at it.
            let y: Vec<f32> = salted_values(m * n, 3).iter().map(|v| v.tanh()).collect();
            let (y, grad) = (tensor(y, m, n), tensor(salted_values(m * n, 4), m, n));
            let layer = LayerDims {
                batch: m,
                inputs: k,
                outputs: n,
            };
            let chunked = applies(layer, (view(&x), view(&w)), need_dx, threads);
            let g = linear_backward(x, w, y, grad, act, need_dx);
            let mut out = vec![values(g.dw, k * n), values(g.db, n)];
            out.extend(g.dx.map(|dx| values(dx, m * k)));
            (out, chunked)
        })
    }

    #[test]
    fn a_layers_backward_by_chunks_gives_the_bits_of_the_whole_layers() {
        // tabular-mlp's two hidden layers; sums of 3 to 5 chunks; a last chunk of 52 rows, and
        // one of a single row without dx; the widest dx that short_sums takes on AVX-512 (32
        // inputs summed over 16 outputs; on AVX2 it stays whole); every activation.
        for (dims, act, need_dx) in [
            ((2048, 61, 20), Activation::Tanh, false),
            ((2048, 20, 10), Activation::Tanh, true),
            ((2100, 20, 10), Activation::Relu, true),
            ((1536, 32, 16), Activation::Identity, true),
            ((1537, 40, 3), Activation::Relu, false),
            ((1300, 12, 9), Activation::Tanh, true),
        ] {
            for w_columns in [false, true] {
                let (whole, _) = gradients(1, dims, act, (need_dx, w_columns));
                for threads in [2, 3] {
                    let (ours, chunked) = gradients(threads, dims, act, (need_dx, w_columns));
                    let dx_taken = !need_dx || dims.1 <= short_sums::wide(detected());
                    // AVX2's tiles of 16 rows give 40 rows to 3 threads as a block each, less
                    // for the busiest thread than two of the 4 chunks (`long_sums`).
                    let rows_balance = threads == 3 && dims.1 == 40 && detected() == Simd::Avx2;
                    let taken = detected() >= Simd::Avx2 && dx_taken && !rows_balance;
                    assert_eq!(chunked, taken, "{dims:?} on {threads} threads");
                    for (i, (a, b)) in ours.iter().zip(&whole).enumerate() {
                        let case = format!("{dims:?}, {act:?}, w in columns {w_columns}");
                        assert!(same_bits(a, b), "{case}, gradient {i}, {threads} threads");
                    }
                }
            }
        }
    }

    #[test]
    fn a_group_that_panics_lets_the_next_one_panic_rather_than_wait() {
        let failed: Carried = OnceLock::new();
        std::thread::scope(|s| {
            let group = s.spawn(|| {
                let _poison = Poison(&failed);
                panic!("a group fails")
            });
            assert!(group.join().is_err());
        });
        assert_eq!(failed.get(), Some(&None));
        let waited = std::panic::catch_unwind(|| failed.wait_for());
        assert!(waited.is_err(), "waiting on a group that panicked");
        let done: Carried = OnceLock::new();
        {
            let _poison = Poison(&done);
            done.set(Some(vec![1.5])).unwrap();
        }
        assert_eq!(done.wait_for(), vec![1.5]);
    }

    #[test]
    fn layers_whose_dx_would_leave_short_sums_stay_whole() {
        // x [m x k] and w [k x n] in rows.
        let views = |k: usize, n: usize| -> (View, View) {
            let null = std::ptr::null();
            ((null, k as isize, 1), (null, n as isize, 1))
        };
        // A last chunk of one row (the crate's matrix-vector kernel for dx), a sum of 17
        // outputs, 33 inputs, and too few chunks for the threads.
        assert!(!applies(layer((1537, 20, 10)), views(20, 10), true, 2));
        assert!(!applies(layer((2048, 20, 17)), views(20, 17), true, 2));
        assert!(!applies(layer((2048, 33, 10)), views(33, 10), true, 2));
        assert!(!applies(layer((1024, 20, 10)), views(20, 10), true, 3));
        // Too little work for a pool's blocks of rows.
        assert!(!applies(layer((1024, 4, 4)), views(4, 4), false, 2));
        assert_eq!(
            applies(layer((1537, 20, 10)), views(20, 10), false, 2),
            detected() >= Simd::Avx2
        );
    }
}
