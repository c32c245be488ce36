use burn_checkpoint_macros::checkpoint;

struct Block;

impl Block {
    #[checkpoint]
    async fn forward(&self, x: f32) -> f32 {
        x * 2.0
    }
}

fn main() {}
