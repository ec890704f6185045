"""`pgrpo report`: a self-contained HTML run report with embedded plots."""

from __future__ import annotations

from pgrpo.report.build import ReportResult, build_report

__all__ = ["ReportResult", "build_report"]
