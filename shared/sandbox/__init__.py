"""Code sandboxes: one stateful interpreter per session, behind one small interface."""

from shared.sandbox.base import CodeSandbox, ExecutionResult, SandboxProvider

__all__ = ["CodeSandbox", "ExecutionResult", "SandboxProvider"]
