//! The shape of the GPT every GPT benchmark of both Burn crates trains, as its command line and
//! its title give it: [`GptShape`].

use serde::{Deserialize, Serialize};

/// A GPT's size and its batch: `--blocks --d-model --heads --seq --batch --vocab` (flatten it into
/// a benchmark's arguments), or one `blocks,width,heads,vocabulary,sequence,batch` value
/// ([`GptShape::from_list`], for a benchmark whose `--batch` is another model's). No Burn in it:
/// each crate builds its model from the fields.
///
/// ```
/// use app_kit::gpt::GptShape;
/// use clap::Parser;
///
/// #[derive(Parser)]
/// struct Args {
///     #[command(flatten)]
///     shape: GptShape,
/// }
///
/// let args = Args::parse_from(["bench", "--blocks", "4", "--d-model", "64"]);
/// assert_eq!((args.shape.blocks, args.shape.d_model, args.shape.batch), (4, 64, 16));
/// assert_eq!(GptShape::from_list("4,64,4,512,128,16").unwrap(), args.shape);
/// let described = "GPT 4 blocks × d 64, 4 heads, vocab 512, batch 16×128 tokens";
/// assert_eq!(args.shape.describe(), described);
///
/// // A benchmark with other defaults: the same flags, its own values.
/// let small = GptShape { blocks: 2, batch: 8, ..GptShape::default() };
/// let args: Args = GptShape::parse_from_with(small, ["bench", "--heads", "2"]);
/// assert_eq!((args.shape.blocks, args.shape.heads, args.shape.batch), (2, 2, 8));
/// ```
#[derive(clap::Args, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GptShape {
    /// Transformer blocks.
    #[arg(long, default_value_t = DEFAULT.blocks)]
    pub blocks: usize,
    /// Model width.
    #[arg(long, default_value_t = DEFAULT.d_model)]
    pub d_model: usize,
    /// Attention heads.
    #[arg(long, default_value_t = DEFAULT.heads)]
    pub heads: usize,
    /// Vocabulary size.
    #[arg(long, default_value_t = DEFAULT.vocab)]
    pub vocab: usize,
    /// Tokens per sequence (the context).
    #[arg(long, default_value_t = DEFAULT.seq)]
    pub seq: usize,
    /// Sequences per step.
    #[arg(long, default_value_t = DEFAULT.batch)]
    pub batch: usize,
}

/// The flags' defaults, written once for them and for [`Default`].
const DEFAULT: GptShape = GptShape {
    blocks: 8,
    d_model: 128,
    heads: 4,
    vocab: 512,
    seq: 128,
    batch: 16,
};

impl Default for GptShape {
    /// 8 blocks × d 128, 4 heads, vocab 512, batch 16×128: the flags' defaults.
    fn default() -> Self {
        DEFAULT
    }
}

impl GptShape {
    /// From `blocks,width,heads,vocabulary,sequence,batch` (a `value_parser` for one `--gpt`
    /// argument).
    pub fn from_list(list: &str) -> Result<GptShape, String> {
        let numbers: Result<Vec<usize>, _> = list.split(',').map(|n| n.trim().parse()).collect();
        match numbers.as_deref() {
            Ok(&[blocks, d_model, heads, vocab, seq, batch]) => Ok(GptShape {
                blocks,
                d_model,
                heads,
                vocab,
                seq,
                batch,
            }),
            _ => Err(format!(
                "a GPT is blocks,width,heads,vocabulary,sequence,batch (six counts), not `{list}`"
            )),
        }
    }

    /// The shape as the benchmarks' titles give it: `GPT 8 blocks × d 128, 4 heads, vocab 512,
    /// batch 16×128 tokens`.
    pub fn describe(&self) -> String {
        let GptShape {
            blocks,
            d_model,
            heads,
            seq,
            batch,
            vocab,
        } = self;
        format!(
            "GPT {blocks} blocks × d {d_model}, {heads} heads, vocab {vocab}, batch {batch}×{seq} \
             tokens"
        )
    }

    /// Parses the process's arguments into `P`, whose flattened [`GptShape`] takes `defaults`
    /// where a flag is not given (a benchmark whose model is another size by default).
    pub fn parse_with<P: clap::Parser>(defaults: GptShape) -> P {
        Self::parse_from_with(defaults, std::env::args_os())
    }

    /// [`GptShape::parse_with`] over `args` (the first one the program's name).
    pub fn parse_from_with<P, I, T>(defaults: GptShape, args: I) -> P
    where
        P: clap::Parser,
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let flags = [
            ("blocks", defaults.blocks),
            ("d_model", defaults.d_model),
            ("heads", defaults.heads),
            ("seq", defaults.seq),
            ("batch", defaults.batch),
            ("vocab", defaults.vocab),
        ];
        let mut command = P::command();
        for (id, value) in flags {
            // clap keeps a default as `&'static str`: one small string per flag, once a run.
            let value: &'static str = Box::leak(value.to_string().into_boxed_str());
            command = command.mut_arg(id, |arg| arg.default_value(value));
        }
        let mut matches = command.get_matches_from(args);
        P::from_arg_matches_mut(&mut matches).unwrap_or_else(|error| error.exit())
    }
}
