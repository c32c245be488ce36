//! The reference demo's learning-rate schedule, which both trainers follow.

/// The learning rate of `epoch` (from 0): `lr` divided by 10 at 50% and again at 75% of the
/// `epochs`.
///
/// ```
/// use app_kit::schedule::learning_rate;
///
/// let rates: Vec<f64> = (0..4).map(|epoch| learning_rate(0.1, epoch, 4)).collect();
/// assert_eq!(rates, [0.1, 0.1, 0.1 / 10.0, 0.1 / 100.0]);
/// ```
pub fn learning_rate(lr: f64, epoch: usize, epochs: usize) -> f64 {
    let progress = epoch as f64 / epochs as f64;
    if progress < 0.5 {
        lr
    } else if progress < 0.75 {
        lr / 10.0
    } else {
        lr / 100.0
    }
}
