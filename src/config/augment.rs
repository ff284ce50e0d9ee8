//! `[model.augment]`: a convolutional network's train-time augmentation. Each training image of
//! each step is shifted by up to `crop_padding` pixels each way with zeros coming in (a random
//! crop of the image padded by that much, torchvision's `RandomCrop(size, padding)`), then
//! mirrored left to right with probability 1/2 when `flip` is on. Validation, `eval` and
//! `predict` see the images as they are.

use crate::error::Result;
use crate::input_err;
use serde::{Deserialize, Serialize};

/// `[model.augment]` as written; present, it is on, and every key has a default.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawAugment {
    /// The most pixels an image moves each way (default 2; 0 for no crop).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crop_padding: Option<usize>,
    /// Mirror left to right with probability 1/2 (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flip: Option<bool>,
}

/// The augmentation, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Augment {
    pub crop_padding: usize,
    pub flip: bool,
}

impl RawAugment {
    pub fn check(&self) -> Result<Augment> {
        let augment = Augment {
            crop_padding: self.crop_padding.unwrap_or(2),
            flip: self.flip.unwrap_or(true),
        };
        if augment.crop_padding == 0 && !augment.flip {
            return Err(input_err!(
                "model.augment with crop_padding = 0 and flip = false changes nothing; leave the table out to train on the images as they are"
            ));
        }
        Ok(augment)
    }
}

impl Augment {
    pub fn to_raw(self) -> RawAugment {
        RawAugment {
            crop_padding: Some(self.crop_padding),
            flip: Some(self.flip),
        }
    }

    /// One line where the shift could move a whole image out of its frame.
    pub fn check_fits(self, image: [usize; 3]) -> Result<()> {
        let [_, h, w] = image;
        if self.crop_padding >= h.min(w) {
            return Err(input_err!(
                "model.augment.crop_padding = {} must be smaller than the {h}x{w} images' sides",
                self.crop_padding
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_crop_by_two_and_flip_and_a_no_op_or_oversized_shift_is_refused() {
        let a = RawAugment::default().check().unwrap();
        assert_eq!((a.crop_padding, a.flip), (2, true));
        assert_eq!(a.to_raw().check().unwrap(), a);
        let none = RawAugment {
            crop_padding: Some(0),
            flip: Some(false),
        };
        assert!(
            none.check()
                .unwrap_err()
                .to_string()
                .contains("changes nothing")
        );
        let big = Augment {
            crop_padding: 8,
            flip: false,
        };
        assert!(big.check_fits([1, 28, 28]).is_ok());
        assert_eq!(
            big.check_fits([3, 8, 16]).unwrap_err().to_string(),
            "model.augment.crop_padding = 8 must be smaller than the 8x16 images' sides"
        );
    }
}
