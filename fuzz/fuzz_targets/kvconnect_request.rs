#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| stampkv_fuzz_harness::kvconnect_request(data));
