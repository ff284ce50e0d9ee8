//! Class-weighted training losses (`class_weight`, as Keras applies it): each row's loss times
//! its class's weight, averaged over the rows. Shared by the single MLP (`[n, ...]`) and the
//! replicas (`[K, n, ...]`), which reduce per replica themselves.

use burn::prelude::*;
use burn::tensor::activation::{log_sigmoid, log_softmax};

/// The weight of each row's class: `weights[labels]`, shaped as `labels`.
fn row_weights<B: Backend, const D: usize>(
    labels: Tensor<B, D, Int>,
    weights: &[f32],
) -> Tensor<B, D> {
    let shape = labels.shape();
    let table = Tensor::<B, 1>::from_floats(weights, &labels.device());
    table.select(0, labels.reshape([-1])).reshape(shape)
}

/// Weighted softmax cross-entropy of logits `[n, C]` and class indices `[n]`: a scalar `[1]`.
pub fn cross_entropy<B: Backend>(
    logits: Tensor<B, 2>,
    labels: Tensor<B, 1, Int>,
    weights: &[f32],
) -> Tensor<B, 1> {
    let [n, classes] = logits.dims();
    let rows = cross_entropy_rows(
        logits.reshape([1, n, classes]),
        labels.reshape([1, n]),
        weights,
    );
    rows.mean()
}

/// Weighted softmax cross-entropy per row for every replica: logits `[K, n, C]`, class
/// indices `[K, n]`; gives `[K, n]`.
pub fn cross_entropy_rows<B: Backend>(
    logits: Tensor<B, 3>,
    labels: Tensor<B, 2, Int>,
    weights: &[f32],
) -> Tensor<B, 2> {
    let [k, n] = labels.dims();
    let picked = log_softmax(logits, 2).gather(2, labels.clone().reshape([k, n, 1]));
    (picked.reshape([k, n]) * row_weights(labels, weights)).neg()
}

/// Weighted binary cross-entropy on logits, row by row (any shape; `y` is 0 or 1):
/// `-w_y (y log σ(z) + (1 - y) log σ(-z))`, with the two weights `[w_0, w_1]`.
pub fn binary_cross_entropy<B: Backend, const D: usize>(
    z: Tensor<B, D>,
    y: Tensor<B, D>,
    weights: &[f32],
) -> Tensor<B, D> {
    let w = y
        .clone()
        .mul_scalar(weights[1] - weights[0])
        .add_scalar(weights[0]);
    let positive = y.clone() * log_sigmoid(z.clone());
    let negative = y.neg().add_scalar(1.0) * log_sigmoid(z.neg());
    ((positive + negative) * w).neg()
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;
    use burn::nn::loss::{BinaryCrossEntropyLossConfig, CrossEntropyLossConfig};
    use burn::tensor::{Distribution, TensorData};

    fn close(a: Tensor<Flex, 1>, b: Tensor<Flex, 1>) {
        let (a, b): (Vec<f32>, Vec<f32>) =
            (a.to_data().to_vec().unwrap(), b.to_data().to_vec().unwrap());
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn unit_weights_give_burns_own_losses() {
        let device = Default::default();
        let logits = Tensor::<Flex, 2>::random([16, 3], Distribution::Normal(0.0, 2.0), &device);
        let labels = Tensor::<Flex, 1, Int>::from_data(
            TensorData::from([0i64, 1, 2, 2, 1, 0, 0, 1, 2, 1, 1, 0, 2, 2, 0, 1]),
            &device,
        );
        let burn = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(logits.clone(), labels.clone());
        close(cross_entropy(logits, labels, &[1.0; 3]), burn);

        let z = Tensor::<Flex, 2>::random([16, 1], Distribution::Normal(0.0, 3.0), &device);
        let y = Tensor::<Flex, 2, Int>::from_data(
            TensorData::new((0..16i64).map(|i| i % 3 % 2).collect::<Vec<_>>(), [16, 1]),
            &device,
        );
        let burn = BinaryCrossEntropyLossConfig::new()
            .with_logits(true)
            .init(&device)
            .forward(z.clone(), y.clone());
        close(binary_cross_entropy(z, y.float(), &[1.0, 1.0]).mean(), burn);
    }

    #[test]
    fn each_row_counts_its_class_weight() {
        let device = Default::default();
        let logits = Tensor::<Flex, 2>::random([4, 2], Distribution::Normal(0.0, 1.0), &device);
        let labels = Tensor::<Flex, 1, Int>::from_data(TensorData::from([0i64, 1, 1, 0]), &device);
        let rows = cross_entropy_rows(
            logits.clone().reshape([1, 4, 2]),
            labels.clone().reshape([1, 4]),
            &[1.0, 1.0],
        );
        // Weights 2 and 0.5: the rows' losses times their class's weight, over 4 rows.
        let by_hand: Vec<f32> = rows.to_data().to_vec().unwrap();
        let expected =
            (2.0 * by_hand[0] + 0.5 * by_hand[1] + 0.5 * by_hand[2] + 2.0 * by_hand[3]) / 4.0;
        close(
            cross_entropy(logits, labels, &[2.0, 0.5]),
            Tensor::from_floats([expected], &device),
        );

        let z = Tensor::<Flex, 1>::from_floats([0.3, -1.2], &device);
        let y = Tensor::<Flex, 1>::from_floats([1.0, 0.0], &device);
        let unit: Vec<f32> = binary_cross_entropy(z.clone(), y.clone(), &[1.0, 1.0])
            .to_data()
            .to_vec()
            .unwrap();
        let weighted = binary_cross_entropy(z, y, &[3.0, 0.25]);
        close(
            weighted,
            Tensor::from_floats([0.25 * unit[0], 3.0 * unit[1]], &device),
        );
    }
}
