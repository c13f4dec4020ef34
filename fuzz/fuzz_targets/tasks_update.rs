#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    mcp_task_layer_fuzz::targets::tasks_update(data);
});
