"""``torch.backends``' switches (kernelgrad/backends/torch_settings.py and the small
modules beside it): the idioms PyTorch programs use work under the torch alias, and the
settings read back as set."""

from __future__ import annotations

from kernelgrad.torch_alias import aliased


def test_backends_idioms_run_under_the_torch_alias():
    with aliased():
        import torch
        import torch.backends.cudnn as cudnn

        cudnn.benchmark = True
        cudnn.deterministic = True
        try:
            assert torch.backends.cudnn.benchmark and torch.backends.cudnn.deterministic
            assert torch.backends.cudnn.is_available() is False
            assert torch.backends.mps.is_available() is False
            assert torch.backends.openmp.is_available() is True
            torch.backends.cuda.matmul.allow_tf32 = True
            assert torch.backends.cuda.matmul.allow_tf32 is True
            with torch.backends.cuda.sdp_kernel(enable_flash=False):
                assert not torch.backends.cuda.flash_sdp_enabled()
            assert torch.backends.cuda.flash_sdp_enabled()
            assert torch.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")
            device = (
                "cuda"
                if torch.cuda.is_available()
                else "mps"
                if torch.backends.mps.is_available()
                else "cpu"
            )
            assert device in ("cuda", "cpu")
        finally:
            cudnn.benchmark = cudnn.deterministic = False
            torch.backends.cuda.matmul.allow_tf32 = False
