//! Headless Chromium reads the rendered book (filled in below).
