//! burn-train's `Learner` on `Checkpointed<Autodiff<Flex>>`: a burn-train user turns checkpoint
//! regions on by changing the backend type, nothing else. Trains a small DenseNet-BC (each dense
//! layer a region) for one short epoch on a slice of Fashion-MNIST, headless (burn-train without
//! its terminal UI prints each step's progress as a line).
//!
//! ```text
//! cargo run --release -p densenet-bc --example learner
//! ```
//!
//! Needs Fashion-MNIST (`apt-get install dataset-fashion-mnist`).

use burn::backend::{Autodiff, Flex};
use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::transform::PartialDataset;
use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::SgdConfig;
use burn::optim::momentum::MomentumConfig;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Device, Int, Tensor};
use burn::train::metric::{AccuracyMetric, LossMetric};
use burn::train::{
    ClassificationOutput, InferenceStep, Learner, SupervisedTraining, TrainOutput, TrainStep,
};
use burn_checkpoint::Checkpointed;
use densenet_bc::data::{DataSource, ImageBatcher, ImageDataset, ImageItem};
use densenet_bc::{Cut, DenseNet, DenseNetConfig};

/// The only line that differs from a plain burn-train program (`Autodiff<Flex>`).
type B = Checkpointed<Autodiff<Flex>>;

/// DenseNet-BC as a burn-train classifier.
#[derive(Module, Debug)]
struct Classifier<B: Backend> {
    net: DenseNet<B>,
}

/// A batch on a device.
#[derive(Debug, Clone)]
struct ImageBatch<B: Backend> {
    images: Tensor<B, 4>,
    labels: Tensor<B, 1, Int>,
}

/// The trainer's batcher, its host batches moved to the loader's device.
#[derive(Clone)]
struct DeviceBatcher(ImageBatcher);

impl<B: Backend> Batcher<B, ImageItem, ImageBatch<B>> for DeviceBatcher {
    fn batch(&self, items: Vec<ImageItem>, device: &Device<B>) -> ImageBatch<B> {
        let batch = self.0.host_batch(&items);
        ImageBatch {
            images: Tensor::from_data(batch.images, device),
            labels: Tensor::from_data(batch.labels, device),
        }
    }
}

impl<B: Backend> Classifier<B> {
    fn classify(&self, batch: ImageBatch<B>) -> ClassificationOutput<B> {
        let logits = self.net.forward(batch.images);
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), batch.labels.clone());
        ClassificationOutput::new(loss, logits, batch.labels)
    }
}

impl<B: AutodiffBackend> TrainStep for Classifier<B> {
    type Input = ImageBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: ImageBatch<B>) -> TrainOutput<ClassificationOutput<B>> {
        let output = self.classify(batch);
        TrainOutput::new(self, output.loss.backward(), output)
    }
}

impl<B: Backend> InferenceStep for Classifier<B> {
    type Input = ImageBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: ImageBatch<B>) -> ClassificationOutput<B> {
        self.classify(batch)
    }
}

fn main() {
    let splits = match densenet_bc::data::load(DataSource::FashionMnist, None, 1) {
        Ok(splits) => splits,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let device = Default::default();
    let batcher = DeviceBatcher(ImageBatcher::new(splits.shape, &splits.normalisation));
    let train = DataLoaderBuilder::<B, _, _>::new(batcher.clone())
        .batch_size(32)
        .shuffle(1)
        .build(PartialDataset::new(
            ImageDataset(splits.train.clone()),
            0,
            32 * 20,
        ));
    let valid = DataLoaderBuilder::<<B as AutodiffBackend>::InnerBackend, _, _>::new(batcher)
        .batch_size(64)
        .build(PartialDataset::new(
            ImageDataset(splits.valid.clone()),
            0,
            64 * 4,
        ));

    let net = DenseNetConfig::new(10)
        .with_growth_rate(8)
        .with_input_channels(1)
        .with_cut(Cut::Layer)
        .init::<B>(&device);
    let optimizer = SgdConfig::new()
        .with_momentum(Some(MomentumConfig::new().with_dampening(0.0)))
        .init();
    let artifacts = std::env::temp_dir().join("densenet-bc-learner-example");
    let training = SupervisedTraining::new(&artifacts, train, valid)
        .metrics((AccuracyMetric::new(), LossMetric::new()))
        .num_epochs(1)
        .summary();
    let result = training.launch(Learner::new(Classifier { net }, optimizer, 0.05));
    println!(
        "trained {} parameters on Checkpointed<Autodiff<Flex>>; burn-train's logs are in {}",
        result.model.num_params(),
        artifacts.display()
    );
}
