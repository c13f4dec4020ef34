//! Task ids.

use crate::hex::push_hex;

/// A fresh task id: 128 bits from the operating system's CSPRNG, as 32
/// lowercase hex digits.
///
/// The random bytes are fetched 16 ids at a time into a per-thread buffer
/// (one system call instead of sixteen); each byte is used for one id only
/// and cleared once taken.
pub(crate) fn new_task_id() -> Result<String, getrandom::Error> {
    const IDS_PER_FILL: usize = 16;
    thread_local! {
        static POOL: std::cell::RefCell<([u8; 16 * IDS_PER_FILL], usize)> =
            const { std::cell::RefCell::new(([0; 16 * IDS_PER_FILL], 16 * IDS_PER_FILL)) };
    }
    let bytes = POOL.with_borrow_mut(|(pool, used)| -> Result<[u8; 16], getrandom::Error> {
        if *used == pool.len() {
            getrandom::fill(pool)?;
            *used = 0;
        }
        let mut bytes = [0u8; 16];
        let taken = &mut pool[*used..*used + 16];
        bytes.copy_from_slice(taken);
        taken.fill(0);
        *used += 16;
        Ok(bytes)
    })?;
    let mut id = String::with_capacity(32);
    push_hex(&mut id, &bytes);
    Ok(id)
}
