//! SGD's and Adam's updates on `Flex`'s tensors: the kernel crate's passes
//! (`ember_kernels::optimizers`) over each tensor's storage.

use burn::backend::flex::FlexTensor;
pub(super) use ember_kernels::optimizers::sgd;

/// The learning rate of each replica (one for a plain tensor), read from the host-side
/// storage of the CPU backend.
pub fn learning_rates(lr: &super::Lr<burn::backend::Flex>) -> Vec<f32> {
    match lr {
        super::Lr::One(lr) => vec![*lr as f32],
        super::Lr::PerReplica(v) => {
            let v = v.clone().to_contiguous();
            let n = v.layout().num_elements();
            v.storage::<f32>()[v.layout().start_offset()..][..n].to_vec()
        }
    }
}

/// One Adam step on tensors: the new weights and moments; `lrs` as for
/// [`ember_kernels::optimizers::adam`].
pub fn adam(
    w: FlexTensor,
    g: FlexTensor,
    m: FlexTensor,
    v: FlexTensor,
    s: super::AdamStep,
    lrs: &[f32],
) -> (FlexTensor, FlexTensor, FlexTensor) {
    let w = if w.layout().is_contiguous() && w.layout().start_offset() == 0 {
        w
    } else {
        w.to_contiguous()
    };
    let owned = super::contiguous::owned_contiguous;
    let (mut out, mut m, mut v) = (owned(g), owned(m), owned(v));
    let n = out.layout().num_elements();
    let (g, w) = (&mut out.storage_mut::<f32>()[..n], &w.storage::<f32>()[..n]);
    let moments = (
        &mut m.storage_mut::<f32>()[..n],
        &mut v.storage_mut::<f32>()[..n],
    );
    ember_kernels::optimizers::adam(g, w, moments, s, lrs);
    (out, m, v)
}
