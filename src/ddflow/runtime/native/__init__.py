"""The native core: ``ddflow._native``, the Rust crate in ``native/`` bound with PyO3.

The extension is built by the package's build backend (maturin, with the release profile)
when ddflow is installed, from source (which needs a Rust toolchain) or from a wheel. This
package is where the rest of ddflow meets it; :func:`build_info` says which build is loaded.
"""

from ddflow.runtime.native.build import BuildInfo, build_info, native, source_fingerprint

__all__ = ["BuildInfo", "build_info", "native", "source_fingerprint"]
