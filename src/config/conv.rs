//! A convolutional network's keys: `[[model.conv]]` blocks (convolution, optional batch norm,
//! the model's activation, optional max-pool), `model.pooling` between the last block and the
//! MLP head, and the image shape ember writes from the data. The shapes each block leaves are
//! worked out here, so that an image too small for the blocks is one line naming the sizes.

use crate::error::Result;
use crate::input_err;
use serde::{Deserialize, Serialize};

/// One `[[model.conv]]` table as written; every key has a default.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawConv {
    /// Output channels (default 32).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels: Option<usize>,
    /// Square kernel's side (default 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<usize>,
    /// Default 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stride: Option<usize>,
    /// Zero padding on each side (default kernel / 2: the size kept at stride 1, odd kernels).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub padding: Option<usize>,
    /// Batch normalisation after the convolution (default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_norm: Option<bool>,
    /// Max-pool window and stride after the activation; 1 (the default) is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<usize>,
}

/// One convolution block, checked: conv, [batch norm], activation, [max-pool].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvSpec {
    pub channels: usize,
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
    pub batch_norm: bool,
    pub pool: usize,
}

/// What turns the last block's `[channels, height, width]` into the head's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// Every value, `channels × height × width` inputs (PyTorch's `nn.Flatten`).
    Flatten,
    /// Each channel's mean, `channels` inputs (`nn.AdaptiveAvgPool2d(1)`, then flatten).
    Average,
}

impl RawConv {
    /// Block `index` (from 0) checked; errors name `model.conv[index]`.
    pub fn check(&self, index: usize) -> Result<ConvSpec> {
        let field = |name: &str| format!("model.conv[{index}].{name}");
        let at_least_one = |name: &str, v: usize| {
            if v == 0 {
                Err(input_err!("{} = 0 must be at least 1", field(name)))
            } else {
                Ok(v)
            }
        };
        let kernel = at_least_one("kernel", self.kernel.unwrap_or(3))?;
        let spec = ConvSpec {
            channels: at_least_one("channels", self.channels.unwrap_or(32))?,
            kernel,
            stride: at_least_one("stride", self.stride.unwrap_or(1))?,
            padding: self.padding.unwrap_or(kernel / 2),
            batch_norm: self.batch_norm.unwrap_or(false),
            pool: at_least_one("pool", self.pool.unwrap_or(1))?,
        };
        if spec.padding >= spec.kernel {
            return Err(input_err!(
                "{} = {} must be smaller than the kernel ({}): a wider border only adds zeros",
                field("padding"),
                spec.padding,
                spec.kernel
            ));
        }
        Ok(spec)
    }
}

impl ConvSpec {
    /// The block as written out in a resolved config, every key explicit.
    pub fn to_raw(self) -> RawConv {
        RawConv {
            channels: Some(self.channels),
            kernel: Some(self.kernel),
            stride: Some(self.stride),
            padding: Some(self.padding),
            batch_norm: Some(self.batch_norm),
            pool: Some(self.pool),
        }
    }

    /// The side after the convolution, then after the pool, of an input side `n`; `None`
    /// where nothing is left.
    fn sides(self, n: usize) -> (Option<usize>, Option<usize>) {
        let padded = n + 2 * self.padding;
        let conv = (padded >= self.kernel).then(|| (padded - self.kernel) / self.stride + 1);
        let pooled = conv.and_then(|c| (c >= self.pool).then(|| c / self.pool));
        (conv, pooled)
    }
}

/// The `[channels, height, width]` the blocks leave of an image `[channels, height, width]`,
/// or one line naming the block and sizes where an image is too small for them.
pub fn feature_shape(image: [usize; 3], blocks: &[ConvSpec]) -> Result<[usize; 3]> {
    let [mut c, mut h, mut w] = image;
    for (i, b) in blocks.iter().enumerate() {
        let input = match i {
            0 => "images".to_string(),
            _ => format!("maps of model.conv[{}]", i - 1),
        };
        let ((conv_h, pool_h), (conv_w, pool_w)) = (b.sides(h), b.sides(w));
        let (Some(conv_h), Some(conv_w)) = (conv_h, conv_w) else {
            return Err(input_err!(
                "model.conv[{i}]: a {k}x{k} kernel with padding {p} does not fit the {h}x{w} {input}",
                k = b.kernel,
                p = b.padding,
            ));
        };
        let (Some(pool_h), Some(pool_w)) = (pool_h, pool_w) else {
            return Err(input_err!(
                "model.conv[{i}]: pool = {} is larger than the {conv_h}x{conv_w} maps its convolution makes of the {h}x{w} {input}",
                b.pool,
            ));
        };
        (c, h, w) = (b.channels, pool_h, pool_w);
    }
    Ok([c, h, w])
}

/// A resolved convolutional network's shapes, checked before a model is built: the blocks fit
/// `model.image`, whose values are `model.inputs` of them.
pub fn check_image(image: Option<[usize; 3]>, inputs: usize, blocks: &[ConvSpec]) -> Result<()> {
    let Some(image) = image else {
        return Err(input_err!(
            "model.inputs = {inputs} without model.image: a convolutional network's resolved config gives both ([channels, height, width]); delete model.inputs to read them from the data again"
        ));
    };
    if image.iter().product::<usize>() != inputs {
        return Err(input_err!(
            "model.image = {image:?} holds {} values, but model.inputs = {inputs}",
            image.iter().product::<usize>()
        ));
    }
    feature_shape(image, blocks).map(|_| ())
}

/// The head's input width: the flattened features or one mean per channel.
pub fn head_inputs(features: [usize; 3], pooling: Pooling) -> usize {
    match pooling {
        Pooling::Flatten => features.iter().product(),
        Pooling::Average => features[0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(channels: usize, kernel: usize, pool: usize) -> ConvSpec {
        RawConv {
            channels: Some(channels),
            kernel: Some(kernel),
            pool: Some(pool),
            ..RawConv::default()
        }
        .check(0)
        .unwrap()
    }

    #[test]
    fn defaults_keep_the_size_and_pools_halve_it() {
        let b = RawConv::default().check(0).unwrap();
        assert_eq!((b.channels, b.kernel, b.stride, b.padding), (32, 3, 1, 1));
        assert_eq!((b.batch_norm, b.pool), (false, 1));
        let blocks = [block(16, 3, 2), block(32, 3, 2)];
        assert_eq!(feature_shape([1, 28, 28], &blocks).unwrap(), [32, 7, 7]);
        assert_eq!(head_inputs([32, 7, 7], Pooling::Flatten), 32 * 49);
        assert_eq!(head_inputs([32, 7, 7], Pooling::Average), 32);
    }

    #[test]
    fn strides_and_valid_kernels_shrink_as_pytorch_computes() {
        let b = RawConv {
            kernel: Some(5),
            stride: Some(2),
            padding: Some(0),
            ..RawConv::default()
        }
        .check(0)
        .unwrap();
        // floor((28 - 5) / 2) + 1 = 12, as nn.Conv2d(1, 32, 5, stride=2).
        assert_eq!(feature_shape([3, 28, 30], &[b]).unwrap(), [32, 12, 13]);
    }

    #[test]
    fn too_small_images_and_bad_keys_are_one_line() {
        let e = feature_shape([1, 4, 4], &[block(8, 3, 2), block(8, 3, 4)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "model.conv[1]: pool = 4 is larger than the 2x2 maps its convolution makes of the 2x2 maps of model.conv[0]"
        );
        let valid = RawConv {
            kernel: Some(7),
            padding: Some(0),
            ..RawConv::default()
        };
        let e = feature_shape([1, 5, 9], &[valid.check(0).unwrap()]).unwrap_err();
        assert!(
            e.to_string()
                .contains("7x7 kernel with padding 0 does not fit the 5x9 images")
        );
        let zero = RawConv {
            channels: Some(0),
            ..RawConv::default()
        };
        assert_eq!(
            zero.check(2).unwrap_err().to_string(),
            "model.conv[2].channels = 0 must be at least 1"
        );
        let wide = RawConv {
            padding: Some(3),
            ..RawConv::default()
        };
        assert!(
            wide.check(0)
                .unwrap_err()
                .to_string()
                .contains("padding = 3 must be smaller")
        );
    }

    #[test]
    fn a_resolved_image_must_match_the_inputs_and_fit_the_blocks() {
        let blocks = [block(8, 3, 2)];
        assert!(check_image(Some([1, 28, 28]), 784, &blocks).is_ok());
        let e = check_image(None, 784, &blocks).unwrap_err().to_string();
        assert!(
            e.starts_with("model.inputs = 784 without model.image"),
            "{e}"
        );
        let e = check_image(Some([3, 8, 8]), 784, &blocks)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "model.image = [3, 8, 8] holds 192 values, but model.inputs = 784"
        );
        let e = check_image(Some([1, 1, 784]), 784, &blocks)
            .unwrap_err()
            .to_string();
        assert!(e.contains("pool = 2 is larger than the 1x784 maps"), "{e}");
    }
}
