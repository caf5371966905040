"""Server-rendered pages (filled in below the API); placeholder router so the app factory composes."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
