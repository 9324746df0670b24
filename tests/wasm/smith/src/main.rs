//! `ms-smith generate CONFIG.json [FUEL] < SEED > MODULE.wasm`: a module from the seed bytes,
//! configured by a JSON object with `wasm-tools smith`'s names (`max-funcs`, `exports`, ...);
//! with FUEL, loops and calls are made to end (`--ensure-termination --fuel`). Exit status 2:
//! the seed was too short to make a module.
//!
//! `ms-smith print MODULE.wasm`: the module as text.

use std::io::{Read, Write};
use std::process::ExitCode;

fn generate(config_path: &str, fuel: Option<&String>) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(config_path).map_err(|e| format!("{config_path}: {e}"))?;
    let config: wasm_smith::Config =
        serde_json::from_str(&text).map_err(|e| format!("{config_path}: {e}"))?;
    let mut seed = Vec::new();
    std::io::stdin().read_to_end(&mut seed).map_err(|e| format!("stdin: {e}"))?;
    let mut input = arbitrary::Unstructured::new(&seed);
    let mut module = match wasm_smith::Module::new(config, &mut input) {
        Ok(module) => module,
        Err(e) => {
            eprintln!("no module from this seed: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if let Some(fuel) = fuel {
        let fuel: u32 = fuel.parse().map_err(|e| format!("fuel {fuel}: {e}"))?;
        module.ensure_termination(fuel).map_err(|e| format!("ensure termination: {e}"))?;
    }
    std::io::stdout()
        .write_all(&module.to_bytes())
        .map_err(|e| format!("stdout: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

fn print(path: &str) -> Result<ExitCode, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let text = wasmprinter::print_bytes(&bytes).map_err(|e| format!("{path}: {e}"))?;
    println!("{text}");
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match args.get(1).map(String::as_str) {
        Some("generate") if args.len() >= 3 => generate(&args[2], args.get(3)),
        Some("print") if args.len() == 3 => print(&args[2]),
        _ => Err("usage: ms-smith generate CONFIG.json [FUEL] < SEED | ms-smith print FILE".into()),
    };
    result.unwrap_or_else(|message| {
        eprintln!("ms-smith: {message}");
        ExitCode::from(1)
    })
}
