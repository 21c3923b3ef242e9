//! How a client connects: the access token, the retry policy, the timeouts.

use std::time::Duration;

/// How [`crate::RemoteKv::connect`] talks to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// The access token presented in the metadata exchange (`authorization: Bearer ...`).
    pub access_token: String,
    /// Retries of 5xx answers and network errors.
    pub retry: Retry,
    /// Sleep this long before every HTTP request: a stand-in for network distance in tests
    /// and benchmarks (default zero).
    pub added_latency: Duration,
    /// Longest wait for one HTTP exchange (connect, send, whole answer); for a watch, for
    /// its headers and then for each frame (servers ping every few seconds). A timeout
    /// counts as a network error, so it is retried. Default 30 s.
    pub request_timeout: Duration,
}

impl ConnectOptions {
    /// The defaults for `access_token`: [`Retry::default`], no added latency, 30 s timeout.
    ///
    /// ```
    /// use stampkv_client::ConnectOptions;
    /// use std::time::Duration;
    ///
    /// let options = ConnectOptions::new("my-access-token");
    /// assert_eq!(options.retry.attempts, 5);
    /// assert_eq!(options.request_timeout, Duration::from_secs(30));
    /// ```
    pub fn new(access_token: impl Into<String>) -> ConnectOptions {
        ConnectOptions {
            access_token: access_token.into(),
            retry: Retry::default(),
            added_latency: Duration::ZERO,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Retries of a request answered with a 5xx status or failed by the network. 4xx answers
/// are final and never retried.
///
/// Attempt `n` (from 1) that fails waits a random time between half and one and a half of
/// `base_delay * 2^(n-1)` (capped at 10 s) before attempt `n + 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Requests sent at most, the first included: 1 = no retry. 0 counts as 1.
    pub attempts: u32,
    /// The mean wait after the first failure.
    pub base_delay: Duration,
}

impl Retry {
    /// No retries: every failure is reported at once.
    pub const NONE: Retry = Retry { attempts: 1, base_delay: Duration::ZERO };

    /// The wait after failed attempt `attempt` (1 = the first request).
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(16);
        let mean = self.base_delay.saturating_mul(1 << exponent).min(MAX_DELAY);
        // Uniform in [mean/2, 3*mean/2).
        mean / 2 + mean.mul_f64(fastrand::f64())
    }
}

/// The longest mean wait between two attempts.
const MAX_DELAY: Duration = Duration::from_secs(10);

impl Default for Retry {
    /// 5 attempts, 200 ms base delay (Deno's base for data path calls).
    fn default() -> Self {
        Retry { attempts: 5, base_delay: Duration::from_millis(200) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_exponentially_within_their_jitter() {
        let retry = Retry { attempts: 10, base_delay: Duration::from_millis(100) };
        for _ in 0..100 {
            let first = retry.delay(1);
            assert!(first >= Duration::from_millis(50) && first < Duration::from_millis(150), "{first:?}");
            let third = retry.delay(3);
            assert!(third >= Duration::from_millis(200) && third < Duration::from_millis(600), "{third:?}");
            assert!(retry.delay(40) < Duration::from_secs(15));
        }
        assert_eq!(Retry::NONE.delay(1), Duration::ZERO);
    }
}
