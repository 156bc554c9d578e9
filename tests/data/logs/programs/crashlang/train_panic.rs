// A toy "training loop" that panics the way candle/burn/tokenizers programs do.
// Modes (argv[1]): unwrap (Result::unwrap on Err in main), index (slice index out of
// bounds), thread (a worker thread panics, main joins and unwraps), healthy (prints
// warning/error/panic words and exits 0).
use std::thread;

fn load_shard(name: &str) -> Result<Vec<f32>, String> {
    if name.ends_with(".missing") {
        Err(format!("No such file or directory (os error 2): {name}"))
    } else {
        Ok(vec![0.5; 4])
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "healthy".into());
    for step in 0..3 {
        println!("step {step} loss {:.4}", 2.0 / (step as f32 + 1.0));
    }
    match mode.as_str() {
        "unwrap" => {
            let w = load_shard("model.safetensors.missing").unwrap();
            println!("{}", w.len());
        }
        "index" => {
            let v = vec![1.0f32; 4];
            let i = std::env::args().count() + 9;
            println!("{}", v[i]);
        }
        "thread" => {
            let h = thread::Builder::new().name("loader-0".into()).spawn(|| {
                let w: Option<Vec<f32>> = None;
                w.expect("tokenizer.json not loaded");
            }).unwrap();
            h.join().unwrap();
        }
        _ => {
            eprintln!("warning: the `panic` setting is `unwind`; error counters: 0");
            let r = std::panic::catch_unwind(|| { let e: Result<u8, &str> = Err("retry"); e.unwrap_or(0) });
            println!("recovered: {:?}; panic=abort not set; no error", r.is_ok());
            println!("done, 3 steps");
        }
    }
}
