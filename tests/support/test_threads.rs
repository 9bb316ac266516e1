//! More tests at once in the suites whose tests mostly wait: on fake servers, on the bot
//! processes they start, on timeouts. libtest runs one test per core by default, which on two
//! cores left the Telegram suite 60 s of mostly sleeping (25 s with 6 at a time, the same CPU).

/// Make a suite run `$threads` tests at once unless told otherwise: `waiting_suite!(6);` in
/// its `main.rs`. `RUST_TEST_THREADS` and `--test-threads` still decide when given.
#[allow(unused_macros)] // the suites that do not wait leave it unused
macro_rules! waiting_suite {
    ($threads:literal) => {
        // Before `main`, from the ELF initializers: libtest reads the variable once it runs.
        #[used]
        #[link_section = ".init_array"]
        static PREFER_TEST_THREADS: extern "C" fn() = {
            extern "C" fn prefer() {
                $crate::support::test_threads::prefer(stringify!($threads));
            }
            prefer
        };
    };
}
#[allow(unused_imports)]
pub(crate) use waiting_suite;

/// Set `RUST_TEST_THREADS` unless it is set. Called only from the initializer above.
pub fn prefer(threads: &str) {
    if std::env::var_os("RUST_TEST_THREADS").is_none() {
        // The process has one thread before `main`: nothing reads the environment meanwhile.
        std::env::set_var("RUST_TEST_THREADS", threads);
    }
}
