//! Deno's console notation ([`stampkv::inspect`]) checked against what Deno 2.9.6 printed.

#![allow(clippy::unwrap_used, clippy::panic, reason = "test code: a panic is a failed test")]

use crate::value_display::{inspect, InspectOptions};

/// Every case of `cli/tests/data_fixtures/inspect_cases.jsonl`: values of every kind,
/// with what Deno 2.9.6 printed for them (`Deno.inspect(value)` and `Deno.inspect(value,
/// {depth: Infinity, iterableLimit: Infinity, maxArrayLength: Infinity, maxStringLength:
/// Infinity, strAbbreviateSize: Infinity})`), written by `inspect_cases.ts` beside it.
#[test]
fn matches_deno_on_recorded_cases() {
    let cases = include_str!("../tests/data_fixtures/inspect_cases.jsonl");
    let mut failures = Vec::new();
    let mut count = 0;
    for (line_number, line) in cases.lines().enumerate() {
        let crate::value_json::Json::Object(members) = crate::value_json::parse_json(line).unwrap() else {
            panic!("line {line_number}")
        };
        let field = |name: &str| members.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap();
        let value = crate::value_json::typed_to_value(field("value"), "$").unwrap();
        for (options, expected) in
            [(InspectOptions::DENO, field("deno")), (InspectOptions::FULL, field("full"))]
        {
            let crate::value_json::Json::String(expected) = expected else { panic!() };
            let actual = inspect(&value, &options);
            count += 1;
            if actual != expected {
                failures
                    .push(format!("line {}:\n--- deno\n{expected}\n--- stampkv\n{actual}", line_number + 1));
            }
        }
    }
    assert!(count >= 1400, "{count} cases");
    assert!(
        failures.is_empty(),
        "{} of {count} differ:\n{}",
        failures.len(),
        failures.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
}
