//! Training on several devices, and on several machines: a [`StepRunner`] over
//! `burn_checkpoint_parallel::DataParallel` (one thread and one replica per device, gradients
//! averaged with burn-collective).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};
use burn::module::AutodiffModule;
use burn::optim::Optimizer;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Int, Tensor};
use burn_checkpoint_parallel::{DataParallel, DataParallelConfig, Nodes, split_batch};

use super::options::TrainOptions;
use super::runner::{EvalOutput, StepOutput, StepRunner, evaluate_batch, train_loss};
use super::save::save_state;
use crate::DenseNet;
use crate::data::HostBatch;
use app_kit::save::Checksums;
use burn_checkpoint::memory::Meter;

/// Images and labels of one worker's part of a validation batch.
type EvalPart<I> = (Tensor<I, 4>, Tensor<I, 1, Int>);

/// A data-parallel runner: each training batch is cut into one equal part per node (every
/// node reads the same batches), and this node's part into one equal shard per device.
pub struct Parallel<B, O>
where
    B: AutodiffBackend,
    O: Optimizer<DenseNet<B>, B> + 'static,
{
    trainer: DataParallel<B, DenseNet<B>, O>,
    devices: Vec<B::Device>,
    /// This node's rank and the node count (0 and 1 on one machine).
    node: (usize, usize),
    meter: Meter,
}

impl<B, O> Parallel<B, O>
where
    B: AutodiffBackend,
    O: Optimizer<DenseNet<B>, B> + 'static,
{
    /// Starts one worker per device, each with a replica of `model` and a copy of `optimizer`;
    /// with `nodes`, joins the other nodes first. The batch size must divide among all devices
    /// of all nodes (every shard the same size, so that the mean of the workers' losses is the
    /// batch's mean).
    pub fn new(
        model: DenseNet<B>,
        optimizer: O,
        devices: Vec<B::Device>,
        nodes: Option<Nodes>,
        options: &TrainOptions,
        meter: Meter,
    ) -> anyhow::Result<Self> {
        let batch_size = options.batch_size;
        let node = nodes.as_ref().map_or((0, 1), |n| (n.rank(), n.count()));
        let all = devices.len() * node.1;
        if !batch_size.is_multiple_of(all) {
            let place = if node.1 > 1 {
                format!("{} devices on each of {} nodes", devices.len(), node.1)
            } else {
                format!("{} devices", devices.len())
            };
            bail!(
                "--batch-size {batch_size} does not divide among {place}: give a multiple of {all}"
            );
        }
        let mut config = DataParallelConfig::new().with_timeout(options.cluster.timeout());
        if let Some(nodes) = nodes {
            config = config.with_nodes(nodes);
        }
        let trainer = DataParallel::with_config(devices.clone(), model, optimizer, 0.0, config)
            .context("cannot start the data-parallel workers")?;
        Ok(Parallel {
            trainer,
            devices,
            node,
            meter,
        })
    }
}

impl<B, O> StepRunner for Parallel<B, O>
where
    B: AutodiffBackend,
    O: Optimizer<DenseNet<B>, B> + 'static,
{
    fn device_count(&self) -> usize {
        self.devices.len()
    }

    fn seed(&mut self, seed: u64) {
        for device in &self.devices {
            B::seed(device, seed);
        }
    }

    fn train_step(&mut self, batch: &HostBatch, lr: f64) -> anyhow::Result<StepOutput> {
        let measure = self.meter.start();
        let device = &self.devices[0];
        // This node's part of the batch (all of it on one machine).
        let (rank, nodes) = self.node;
        let rows = batch.labels.shape[0];
        if !rows.is_multiple_of(nodes) {
            bail!("a batch of {rows} images does not divide among {nodes} nodes");
        }
        let part = rows / nodes;
        let images = Tensor::<B, 4>::from_data(batch.images.clone(), device);
        let labels = Tensor::<B, 1, Int>::from_data(batch.labels.clone(), device);
        let images = split_batch(images.narrow(0, rank * part, part), &self.devices)?;
        let labels = split_batch(labels.narrow(0, rank * part, part), &self.devices)?;
        let shards = images.into_iter().zip(labels).collect();
        // The workers count their shard's right answers here: a step returns only the loss.
        let right = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&right);
        self.trainer.set_learning_rate(lr);
        let loss = self.trainer.step(
            shards,
            move |model: &DenseNet<B>, (images, labels): (Tensor<B, 4>, Tensor<B, 1, Int>)| {
                let (loss, correct) = train_loss(model, images, labels);
                counter.fetch_add(correct, Ordering::Relaxed);
                loss
            },
        )?;
        let peak = measure.finish();
        Ok(StepOutput {
            // This node's part of the batch: its loss; its right answers are not the batch's.
            loss,
            correct: (nodes == 1).then(|| right.load(Ordering::Relaxed)),
            peak_bytes: peak.in_use as usize,
            reserved_bytes: peak.reserved.map(|r| r as usize),
        })
    }

    fn evaluate(&mut self, batch: &HostBatch) -> anyhow::Result<EvalOutput> {
        let n = self.devices.len();
        let device = &self.devices[0];
        let images = Tensor::<B::InnerBackend, 4>::from_data(batch.images.clone(), device);
        let labels = Tensor::<B::InnerBackend, 1, Int>::from_data(batch.labels.clone(), device);
        // The last validation batch may be short: up to one part per worker, of equal size
        // but the last; a worker with no part evaluates nothing (an empty `Vec` shard).
        let mut shards: Vec<Vec<_>> = images
            .chunk(n, 0)
            .into_iter()
            .zip(labels.chunk(n, 0))
            .map(|part| vec![part])
            .collect();
        shards.resize_with(n, Vec::new);
        let results = self.trainer.evaluate(
            shards,
            |model: &<DenseNet<B> as AutodiffModule<B>>::InnerModule,
             parts: Vec<EvalPart<B::InnerBackend>>| {
                parts
                    .into_iter()
                    .map(|(images, labels)| evaluate_batch(model, images, labels))
                    .collect::<Vec<_>>()
            },
        )?;
        Ok(results
            .into_iter()
            .flatten()
            .fold(EvalOutput::default(), |sum, part| EvalOutput {
                loss_sum: sum.loss_sum + part.loss_sum,
                correct: sum.correct + part.correct,
            }))
    }

    fn save(&mut self, dir: &Path) -> anyhow::Result<Checksums> {
        let (model, optimizer) = self.trainer.snapshot()?;
        save_state(model, &optimizer, dir)
    }
}
