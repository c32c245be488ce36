//! A text file as the GPT's data: its bytes are the tokens (a vocabulary of 256, no tokenizer to
//! train or download), cut into windows of `context + 1` bytes (the inputs and, one byte on,
//! their targets); the last tenth of the windows is the validation split.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, ensure};
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, DatasetError};
use burn::tensor::{Device, Int, Tensor, TensorData};

/// The vocabulary: every byte.
pub const VOCAB: usize = 256;

/// Windows `first..first + len` of a text, each `context + 1` bytes, one after another.
///
/// ```
/// use burn::data::dataset::Dataset;
/// use burn_checkpoint_22_train::text::Text;
///
/// let (train, valid) = Text::split(b"abcdefghijklmnopqrstuvwxyz".to_vec(), 1).unwrap();
/// assert_eq!(train.get(0).unwrap(), b"ab");
/// assert_eq!((train.len(), valid.len()), (12, 1)); // 13 windows of 2 bytes
/// ```
#[derive(Clone, Debug)]
pub struct Text {
    bytes: Arc<Vec<u8>>,
    context: usize,
    first: usize,
    len: usize,
}

impl Text {
    /// `bytes` as training and validation windows of `context + 1` bytes: the last tenth of the
    /// windows (at least one) validates. An error if there are fewer than two windows.
    pub fn split(bytes: Vec<u8>, context: usize) -> anyhow::Result<(Text, Text)> {
        let windows = bytes.len() / (context + 1);
        ensure!(
            windows >= 2,
            "{} bytes of text make {windows} window(s) of {} bytes (--context {context} + 1): \
             at least 2 are needed, one to train on and one to validate",
            bytes.len(),
            context + 1
        );
        let valid = (windows / 10).max(1);
        let bytes = Arc::new(bytes);
        let text = |first, len| Text {
            bytes: bytes.clone(),
            context,
            first,
            len,
        };
        Ok((text(0, windows - valid), text(windows - valid, valid)))
    }

    /// The file at `path`, split as [`Text::split`] does.
    pub fn read(path: &Path, context: usize) -> anyhow::Result<(Text, Text)> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        Text::split(bytes, context).with_context(|| path.display().to_string())
    }
}

impl Dataset<Vec<u8>> for Text {
    fn get(&self, index: usize) -> Result<Vec<u8>, DatasetError> {
        // burn-dataset 0.22's contract: an index past the end panics.
        assert!(index < self.len, "window {index} of {}", self.len);
        let start = (self.first + index) * (self.context + 1);
        Ok(self.bytes[start..start + self.context + 1].to_vec())
    }

    fn len(&self) -> usize {
        self.len
    }
}

/// A batch of windows on a device: the tokens `[batch, context]` and, one on, their targets.
#[derive(Clone, Debug)]
pub struct TokenBatch {
    /// The input tokens.
    pub inputs: Tensor<2, Int>,
    /// The token after each input.
    pub targets: Tensor<2, Int>,
}

/// Stacks windows of `context + 1` bytes into a [`TokenBatch`] on the loader's device.
///
/// ```
/// use burn::data::dataloader::batcher::Batcher;
/// use burn::tensor::Device;
/// use burn_checkpoint_22_train::text::{TokenBatch, TokenBatcher};
///
/// let batch: TokenBatch = TokenBatcher.batch(vec![b"abc".to_vec()], &Device::flex());
/// assert_eq!(batch.inputs.dims(), [1, 2]);
/// let targets = batch.targets.into_data().convert::<i64>();
/// assert_eq!(targets.to_vec::<i64>().unwrap(), [98, 99]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TokenBatcher;

impl Batcher<Vec<u8>, TokenBatch> for TokenBatcher {
    fn batch(&self, windows: Vec<Vec<u8>>, device: &Device) -> TokenBatch {
        let (batch, width) = (windows.len(), windows[0].len());
        let tokens = |range: std::ops::Range<usize>| {
            let values: Vec<i64> = windows
                .iter()
                .flat_map(|window| window[range.clone()].iter().map(|&byte| i64::from(byte)))
                .collect();
            Tensor::from_data(TensorData::new(values, [batch, range.len()]), device)
        };
        TokenBatch {
            inputs: tokens(0..width - 1),
            targets: tokens(1..width),
        }
    }
}
