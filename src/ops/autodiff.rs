//! ember's operations on Burn's autodiff backend: each forward records its own backward.

use super::{Activation, EmberBackend, Head, LinearGrads, LossAndCorrect};
use burn::backend::Autodiff;
use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind, unary};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::{FloatTensor, IntTensor};

impl<B: EmberBackend, C: CheckpointStrategy> EmberBackend for Autodiff<B, C> {
    fn data_slice(tensor: FloatTensor<Self>, slices: &[burn::tensor::Slice]) -> FloatTensor<Self> {
        debug_assert!(!tensor.is_tracked(), "data is never tracked");
        Self::from_inner(B::data_slice(Self::inner(tensor), slices))
    }

    fn augment(maps: FloatTensor<Self>, draws: IntTensor<Self>) -> FloatTensor<Self> {
        debug_assert!(!maps.is_tracked(), "data is never tracked");
        Self::from_inner(B::augment(Self::inner(maps), draws))
    }

    fn fused_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        act: Activation,
    ) -> FloatTensor<Self> {
        recorded_linear::<B, C>(B::fused_linear, x, w, b, act)
    }

    fn fused_linear_hidden(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        act: Activation,
    ) -> FloatTensor<Self> {
        recorded_linear::<B, C>(B::fused_linear_hidden, x, w, b, act)
    }

    fn scalar_mse_replicas(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        w: FloatTensor<Self>,
        p: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        /// Keeps the input and the residuals; the backward computes both gradients in one call
        /// of the inner backend. The inputs and targets are data, not parents.
        #[derive(Debug)]
        struct ScalarMseBackward;

        impl<B: EmberBackend> Backward<B, 2> for ScalarMseBackward {
            type State = (B::FloatTensorPrimitive, B::FloatTensorPrimitive);

            fn backward(
                self,
                ops: Ops<Self::State, 2>,
                grads: &mut Gradients,
                _: &mut Checkpointer,
            ) {
                let [node_w, node_p] = ops.parents;
                let grad = grads.consume::<B>(&ops.node);
                let (x, residuals) = ops.state;
                let (dw, dp) = B::scalar_mse_replicas_backward(x, residuals, grad);
                if let Some(node) = node_w {
                    grads.register::<B>(node.id, dw);
                }
                if let Some(node) = node_p {
                    grads.register::<B>(node.id, dp);
                }
            }
        }

        let (x, y) = (x.primitive, y.primitive);
        match ScalarMseBackward
            .prepare::<C>([w.node.clone(), p.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (loss, residuals) =
                    B::scalar_mse_replicas_forward(x.clone(), y, w.primitive, p.primitive);
                prep.finish((x, residuals), loss)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(B::scalar_mse_replicas(x, y, w.primitive, p.primitive))
            }
        }
    }

    fn fused_cross_entropy() -> bool {
        B::fused_cross_entropy()
    }

    fn fused_scalar_mse() -> bool {
        B::fused_scalar_mse()
    }

    fn cross_entropy(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let ops: ClassifierLoss<B> = (B::cross_entropy, B::cross_entropy_backward);
        recorded_classifier_loss::<B, C>(ops, logits, labels)
    }

    fn binary_cross_entropy(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let ops: ClassifierLoss<B> = (B::binary_cross_entropy, B::binary_cross_entropy_backward);
        recorded_classifier_loss::<B, C>(ops, logits, labels)
    }

    fn classifier_head(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        labels: IntTensor<Self>,
        binary: bool,
    ) -> Head<Self> {
        recorded_head::<B, C>([x, w, b], labels, binary)
    }

    fn bce_logits(logits: FloatTensor<Self>, y: FloatTensor<Self>) -> FloatTensor<Self> {
        let ops: BceOps<B> = (B::bce_logits, B::bce_logits_backward);
        recorded_bce::<B, C>(ops, logits, y)
    }

    fn bce_logits_replicas(logits: FloatTensor<Self>, y: FloatTensor<Self>) -> FloatTensor<Self> {
        let ops: BceOps<B> = (B::bce_logits_replicas, B::bce_logits_replicas_backward);
        recorded_bce::<B, C>(ops, logits, y)
    }

    fn conv(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        geometry: (usize, usize),
    ) -> FloatTensor<Self> {
        /// Keeps the input and the weights; `N` is 3 with a bias, 2 without.
        #[derive(Debug)]
        struct ConvBackward<const N: usize>((usize, usize));

        impl<B: EmberBackend, const N: usize> Backward<B, N> for ConvBackward<N> {
            type State = (B::FloatTensorPrimitive, B::FloatTensorPrimitive);

            fn backward(
                self,
                ops: Ops<Self::State, N>,
                grads: &mut Gradients,
                _: &mut Checkpointer,
            ) {
                let grad = grads.consume::<B>(&ops.node);
                let (x, weight) = ops.state;
                let parents = ops.parents;
                let need = (parents[0].is_some(), N == 3 && parents[N - 1].is_some());
                let (dx, dw, db) = B::conv_backward(x, weight, grad, self.0, need);
                let mut each = [dx, Some(dw), db].into_iter();
                for node in parents {
                    if let (Some(node), Some(Some(g))) = (node, each.next()) {
                        grads.register::<B>(node.id, g);
                    }
                }
            }
        }

        let inner = |bias: Option<&FloatTensor<Self>>| {
            B::conv(
                x.primitive.clone(),
                weight.primitive.clone(),
                bias.map(|b| b.primitive.clone()),
                geometry,
            )
        };
        let state = || (x.primitive.clone(), weight.primitive.clone());
        match &bias {
            Some(b) => {
                let parents = [x.node.clone(), weight.node.clone(), b.node.clone()];
                match ConvBackward::<3>(geometry)
                    .prepare::<C>(parents)
                    .compute_bound()
                    .stateful()
                {
                    OpsKind::Tracked(prep) => prep.finish(state(), inner(Some(b))),
                    OpsKind::UnTracked(prep) => prep.finish(inner(Some(b))),
                }
            }
            None => {
                let parents = [x.node.clone(), weight.node.clone()];
                match ConvBackward::<2>(geometry)
                    .prepare::<C>(parents)
                    .compute_bound()
                    .stateful()
                {
                    OpsKind::Tracked(prep) => prep.finish(state(), inner(None)),
                    OpsKind::UnTracked(prep) => prep.finish(inner(None)),
                }
            }
        }
    }

    fn max_pool(x: FloatTensor<Self>, k: usize) -> FloatTensor<Self> {
        /// Keeps the input, the window and the indices where the inner backend keeps them.
        #[derive(Debug)]
        struct MaxPoolBackward;

        impl<B: EmberBackend> Backward<B, 1> for MaxPoolBackward {
            type State = (
                B::FloatTensorPrimitive,
                usize,
                Option<B::IntTensorPrimitive>,
            );

            fn backward(
                self,
                ops: Ops<Self::State, 1>,
                grads: &mut Gradients,
                _: &mut Checkpointer,
            ) {
                let (x, k, indices) = ops.state;
                unary::<B, _>(ops.parents, ops.node, grads, |grad| {
                    B::max_pool_backward(x, k, grad, indices)
                });
            }
        }

        match MaxPoolBackward
            .prepare::<C>([x.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (y, indices) = B::max_pool_for_backward(x.primitive.clone(), k);
                prep.finish((x.primitive, k, indices), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::max_pool(x.primitive, k)),
        }
    }

    fn batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        /// Keeps the input, gamma and the batch's statistics; the backward computes the three
        /// gradients in one call of the inner backend.
        #[derive(Debug)]
        struct BatchNormBackward;

        impl<B: EmberBackend> Backward<B, 3> for BatchNormBackward {
            #[allow(clippy::type_complexity)]
            type State = (
                B::FloatTensorPrimitive,
                B::FloatTensorPrimitive,
                B::FloatTensorPrimitive,
                B::FloatTensorPrimitive,
                f64,
            );

            fn backward(
                self,
                ops: Ops<Self::State, 3>,
                grads: &mut Gradients,
                _: &mut Checkpointer,
            ) {
                let [node_x, node_gamma, node_beta] = ops.parents;
                let grad = grads.consume::<B>(&ops.node);
                let (x, gamma, mean, var, epsilon) = ops.state;
                let (dx, dgamma, dbeta) =
                    B::batch_norm_backward(x, gamma, mean, var, epsilon, grad);
                for (node, g) in [(node_x, dx), (node_gamma, dgamma), (node_beta, dbeta)] {
                    if let Some(node) = node {
                        grads.register::<B>(node.id, g);
                    }
                }
            }
        }

        let (y, mean, var) = B::batch_norm(
            x.primitive.clone(),
            gamma.primitive.clone(),
            beta.primitive,
            epsilon,
        );
        let y = match BatchNormBackward
            .prepare::<C>([x.node.clone(), gamma.node.clone(), beta.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let state = (
                    x.primitive,
                    gamma.primitive,
                    mean.clone(),
                    var.clone(),
                    epsilon,
                );
                prep.finish(state, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        };
        (y, Self::from_inner(mean), Self::from_inner(var))
    }

    fn tanh(x: FloatTensor<Self>) -> FloatTensor<Self> {
        /// Keeps the forward output: the gradient is `grad * (1 - y^2)`, one pass, no recompute.
        #[derive(Debug)]
        struct TanhBackward;

        impl<B: EmberBackend> Backward<B, 1> for TanhBackward {
            type State = B::FloatTensorPrimitive;

            fn backward(
                self,
                ops: Ops<Self::State, 1>,
                grads: &mut Gradients,
                _: &mut Checkpointer,
            ) {
                let y = ops.state;
                unary::<B, _>(ops.parents, ops.node, grads, |grad| {
                    B::tanh_backward(y, grad)
                });
            }
        }

        match TanhBackward
            .prepare::<C>([x.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let y = B::tanh(x.primitive);
                prep.finish(y.clone(), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(B::tanh(x.primitive)),
        }
    }

    fn dropout(x: FloatTensor<Self>, p: f64, seed: u64) -> FloatTensor<Self> {
        /// Keeps only the rate and the seed: the backward draws the same mask again.
        #[derive(Debug)]
        struct DropoutBackward;

        impl<B: EmberBackend> Backward<B, 1> for DropoutBackward {
            type State = (f64, u64);

            fn backward(
                self,
                ops: Ops<Self::State, 1>,
                grads: &mut Gradients,
                _: &mut Checkpointer,
            ) {
                let (p, seed) = ops.state;
                unary::<B, _>(ops.parents, ops.node, grads, |grad| {
                    B::dropout_backward(grad, p, seed)
                });
            }
        }

        match DropoutBackward
            .prepare::<C>([x.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((p, seed), B::dropout(x.primitive, p, seed)),
            OpsKind::UnTracked(prep) => prep.finish(B::dropout(x.primitive, p, seed)),
        }
    }
}

/// `forward` (a fused linear operation of the inner backend) on Burn's autodiff backend,
/// recording its backward when a parent is tracked.
fn recorded_linear<B: EmberBackend, C: CheckpointStrategy>(
    forward: super::LinearOp<B>,
    x: FloatTensor<Autodiff<B, C>>,
    w: FloatTensor<Autodiff<B, C>>,
    b: FloatTensor<Autodiff<B, C>>,
    act: Activation,
) -> FloatTensor<Autodiff<B, C>> {
    /// Keeps the input, the weight and the output; the backward computes all three gradients
    /// in one call of the inner backend.
    #[derive(Debug)]
    struct LinearBackward;

    impl<B: EmberBackend> Backward<B, 3> for LinearBackward {
        #[allow(clippy::type_complexity)]
        type State = (
            B::FloatTensorPrimitive,
            B::FloatTensorPrimitive,
            B::FloatTensorPrimitive,
            Activation,
        );

        fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<B>(&ops.node);
            let (x, w, y, act) = ops.state;
            let need_dx = ops.parents[0].is_some();
            let g = B::fused_linear_backward(x, w, y, grad, act, need_dx);
            register_layer_grads::<B>(grads, ops.parents.map(|p| p.map(|n| n.id)), g);
        }
    }

    match LinearBackward
        .prepare::<C>([x.node.clone(), w.node.clone(), b.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let y = forward(x.primitive.clone(), w.primitive.clone(), b.primitive, act);
            prep.finish((x.primitive, w.primitive, y.clone(), act), y)
        }
        OpsKind::UnTracked(prep) => {
            prep.finish(forward(x.primitive, w.primitive, b.primitive, act))
        }
    }
}

/// A layer's gradients, each for its parent (`x`, `w`, `b`) where that is tracked.
fn register_layer_grads<B: EmberBackend>(
    grads: &mut Gradients,
    [x, w, b]: [Option<NodeId>; 3],
    g: LinearGrads<B>,
) {
    if let (Some(x), Some(dx)) = (x, g.dx) {
        grads.register::<B>(x, dx);
    }
    if let Some(w) = w {
        grads.register::<B>(w, g.dw);
    }
    if let Some(b) = b {
        grads.register::<B>(b, g.db);
    }
}

/// A classifier's head (its output layer and loss) as one autodiff node whose parents are the
/// layer's input, weight and bias: it keeps what the inner backend's backward reads, and only
/// the loss carries a gradient.
fn recorded_head<B: EmberBackend, C: CheckpointStrategy>(
    [x, w, b]: [FloatTensor<Autodiff<B, C>>; 3],
    labels: IntTensor<Autodiff<B, C>>,
    binary: bool,
) -> Head<Autodiff<B, C>> {
    #[derive(Debug)]
    struct HeadBackward;

    impl<B: EmberBackend> Backward<B, 3> for HeadBackward {
        type State = super::HeadKept<B>;

        fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<B>(&ops.node);
            let need_dx = ops.parents[0].is_some();
            let g = B::classifier_head_backward(ops.state, grad, need_dx);
            register_layer_grads::<B>(grads, ops.parents.map(|p| p.map(|n| n.id)), g);
        }
    }

    let nodes = [x.node.clone(), w.node.clone(), b.node.clone()];
    let (xp, wp) = (x.primitive, w.primitive);
    let head = B::classifier_head(xp.clone(), wp.clone(), b.primitive, labels, binary);
    let kept = (xp, wp, head.logits.clone(), head.dlogits.clone());
    let loss = match HeadBackward.prepare::<C>(nodes).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish(kept, head.loss),
        OpsKind::UnTracked(prep) => prep.finish(head.loss),
    };
    let untracked = <Autodiff<B, C>>::from_inner;
    Head {
        loss,
        correct: untracked(head.correct),
        logits: untracked(head.logits),
        dlogits: untracked(head.dlogits),
    }
}

/// A binary cross-entropy's forward on the inner backend, and its backward given the losses'
/// gradient.
type BceOps<B> = (
    fn(FloatTensor<B>, FloatTensor<B>) -> FloatTensor<B>,
    fn(FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) -> FloatTensor<B>,
);

/// A binary cross-entropy on logits (`ops.0`), its backward (`ops.1`) recorded: it keeps the
/// logits and the targets, which are data, not a parent.
fn recorded_bce<B: EmberBackend, C: CheckpointStrategy>(
    (forward, backward): BceOps<B>,
    logits: FloatTensor<Autodiff<B, C>>,
    y: FloatTensor<Autodiff<B, C>>,
) -> FloatTensor<Autodiff<B, C>> {
    #[derive(Debug)]
    struct BceBackward<B: EmberBackend> {
        backward: fn(FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) -> FloatTensor<B>,
    }

    impl<B: EmberBackend> Backward<B, 1> for BceBackward<B> {
        type State = (B::FloatTensorPrimitive, B::FloatTensorPrimitive);

        fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
            let (z, y) = ops.state;
            unary::<B, _>(ops.parents, ops.node, grads, |grad| {
                (self.backward)(z, y, grad)
            });
        }
    }

    let (z, y) = (logits.primitive, y.primitive);
    match (BceBackward::<B> { backward })
        .prepare::<C>([logits.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let loss = forward(z.clone(), y.clone());
            prep.finish((z, y), loss)
        }
        OpsKind::UnTracked(prep) => prep.finish(forward(z, y)),
    }
}

/// A classifier's loss on the inner backend: its forward (the mean loss and the correct rows
/// from logits and class labels) and its backward (the logits' gradient from the loss's).
type ClassifierLoss<B> = (
    fn(FloatTensor<B>, IntTensor<B>) -> LossAndCorrect<B>,
    fn(FloatTensor<B>, IntTensor<B>, FloatTensor<B>) -> FloatTensor<B>,
);

/// A classifier's loss as one autodiff node that keeps the logits and the labels; the count
/// of correct rows carries no gradient.
fn recorded_classifier_loss<B: EmberBackend, C: CheckpointStrategy>(
    (forward, backward): ClassifierLoss<B>,
    logits: FloatTensor<Autodiff<B, C>>,
    labels: IntTensor<Autodiff<B, C>>,
) -> LossAndCorrect<Autodiff<B, C>> {
    #[derive(Debug)]
    struct LossBackward<B: EmberBackend> {
        backward: fn(FloatTensor<B>, IntTensor<B>, FloatTensor<B>) -> FloatTensor<B>,
    }

    impl<B: EmberBackend> Backward<B, 1> for LossBackward<B> {
        type State = (B::FloatTensorPrimitive, B::IntTensorPrimitive);

        fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
            let (logits, labels) = ops.state;
            unary::<B, _>(ops.parents, ops.node, grads, |grad| {
                (self.backward)(logits, labels, grad)
            });
        }
    }

    let (loss, correct) = forward(logits.primitive.clone(), labels.clone());
    let loss = match (LossBackward::<B> { backward })
        .prepare::<C>([logits.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish((logits.primitive, labels), loss),
        OpsKind::UnTracked(prep) => prep.finish(loss),
    };
    (loss, <Autodiff<B, C>>::from_inner(correct))
}
