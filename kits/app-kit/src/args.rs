//! The trainers' argument parsers (clap `value_parser`s), shared by the trainer for Burn 0.21 and
//! the one for Burn 0.22: counts of at least 1, byte sizes, and the optimizer's settings, each
//! refusing what would not train with why; [`Sgd`], the optimizer's flags both trainers flatten.

/// A parser of counts that must be at least 1.
///
/// ```
/// let count = clap::Arg::new("n").value_parser(app_kit::args::positive());
/// let matches = clap::Command::new("t").arg(count.clone()).try_get_matches_from(["t", "3"]);
/// assert_eq!(matches.unwrap().get_one::<usize>("n"), Some(&3));
/// assert!(clap::Command::new("t").arg(count).try_get_matches_from(["t", "0"]).is_err());
/// ```
pub fn positive() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
}

/// A size in bytes: a number with an optional unit, binary (KiB, MiB, GiB, TiB) or decimal
/// (kB, MB, GB, TB), any case; `B` or nothing for bytes.
///
/// ```
/// use app_kit::args::byte_size;
///
/// assert_eq!(byte_size("6GiB"), Ok(6 << 30));
/// assert_eq!(byte_size("90MiB"), Ok(90 << 20));
/// assert_eq!(byte_size("1.5 gib"), Ok(3 << 29));
/// assert_eq!(byte_size("2GB"), Ok(2_000_000_000));
/// assert_eq!(byte_size("4096"), Ok(4096));
/// assert!(byte_size("6 gigs").unwrap_err().contains("not a unit"));
/// assert!(byte_size("GiB").unwrap_err().contains("not a size"));
/// assert!(byte_size("0MiB").unwrap_err().contains("at least one byte"));
/// ```
pub fn byte_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size: give a number and a unit, as in 6GiB"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => {
            return Err(format!(
                "`{other}` in `{text}` is not a unit: use KiB, MiB, GiB (or kB, MB, GB)"
            ));
        }
    };
    let bytes = value * scale;
    if bytes >= 1.0 && bytes < u64::MAX as f64 {
        Ok(bytes.round() as u64)
    } else {
        Err(format!("`{text}` is not a size of at least one byte"))
    }
}

/// A finite number, or why `text` is not one.
///
/// ```
/// assert_eq!(app_kit::args::finite(" 0.5"), Ok(0.5));
/// assert!(app_kit::args::finite("inf").unwrap_err().contains("finite"));
/// ```
pub fn finite(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(format!("{value} is not a finite number"))
    }
}

/// `--lr`: finite and above 0 (0 would not train, a negative rate climbs the loss).
///
/// ```
/// assert!(app_kit::args::learning_rate("0").unwrap_err().contains("above 0"));
/// ```
pub fn learning_rate(text: &str) -> Result<f64, String> {
    let lr = finite(text)?;
    if lr > 0.0 {
        Ok(lr)
    } else {
        Err(format!(
            "the learning rate must be above 0 (a rate of {lr} does not descend the loss)"
        ))
    }
}

/// `--momentum`: in [0, 1); at 1 or above the velocity never decays and SGD diverges.
///
/// ```
/// assert!(app_kit::args::momentum("1").unwrap_err().contains("below 1"));
/// ```
pub fn momentum(text: &str) -> Result<f64, String> {
    let momentum = finite(text)?;
    if (0.0..1.0).contains(&momentum) {
        Ok(momentum)
    } else {
        Err(format!(
            "momentum must be at least 0 (0 turns it off) and below 1, not {momentum}"
        ))
    }
}

/// `--weight-decay`: 0 (off) or more; a negative decay would grow the weights.
///
/// ```
/// assert!(app_kit::args::weight_decay("-1").unwrap_err().contains("at least 0"));
/// ```
pub fn weight_decay(text: &str) -> Result<f64, String> {
    let decay = finite(text)?;
    if decay >= 0.0 {
        Ok(decay)
    } else {
        Err(format!(
            "weight decay must be at least 0 (0 turns it off), not {decay}"
        ))
    }
}

/// The trainers' optimizer, the reference's: SGD with Nesterov momentum and L2 weight decay,
/// `--lr --momentum --weight-decay` (flatten it into a trainer's options; both trainers do).
///
/// ```
/// use app_kit::args::Sgd;
/// use clap::Parser;
///
/// #[derive(Parser)]
/// struct Options {
///     #[command(flatten)]
///     sgd: Sgd,
/// }
///
/// let options = Options::parse_from(["train", "--momentum", "0"]);
/// assert_eq!(options.sgd, Sgd { lr: 0.1, momentum: 0.0, weight_decay: 1e-4 });
/// assert!(Options::try_parse_from(["train", "--lr", "0"]).is_err());
/// // A negative value is read as one (and refused for what it is), not as a flag.
/// let negative = Options::try_parse_from(["train", "--lr", "-0.1"]).err().unwrap().to_string();
/// assert!(negative.contains("must be above 0"), "{negative}");
/// ```
#[derive(clap::Args, Clone, Copy, Debug, PartialEq)]
pub struct Sgd {
    /// Initial learning rate, above 0 (divided by 10 at 50% and at 75% of the epochs).
    #[arg(long, default_value_t = 0.1, value_parser = learning_rate, allow_negative_numbers = true)]
    pub lr: f64,

    /// SGD momentum (Nesterov), from 0 (off) to below 1.
    #[arg(long, default_value_t = 0.9, value_parser = momentum, allow_negative_numbers = true)]
    pub momentum: f64,

    /// L2 weight decay, 0 (off) or more.
    #[arg(long, default_value_t = 1e-4, value_parser = weight_decay, allow_negative_numbers = true)]
    pub weight_decay: f64,
}
