// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

/**
 * A call into llmsvc failed: {@link #status()} is the library's status code and {@link #detail()}
 * its {@code llmsvc_last_error()} text. Unchecked, like the failures of any remote service call;
 * the important codes have subclasses ({@link NotFoundException}, {@link CancelledException},
 * ...) so callers catch what they can handle.
 */
public class LLMException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int code;
  private final String detail;

  LLMException(int code, String detail) {
    super(name(code) + (detail.isEmpty() ? "" : ": " + detail));
    this.code = code;
    this.detail = detail;
  }

  /** The C name of a status, as llmsvc_status_name() spells it (no native call on an error path). */
  static String name(int code) {
    Status s = Status.of(code);
    if (s == Status.UNKNOWN) return "LLMSVC status " + code;
    return s == Status.OK ? "LLMSVC_OK" : "LLMSVC_ERR_" + s.name();
  }

  /** The raw C status value (useful when {@link #status()} is {@link Status#UNKNOWN}). */
  public int code() {
    return code;
  }

  public Status status() {
    return Status.of(code);
  }

  /** The library's human-readable detail of the failure (may be empty). */
  public String detail() {
    return detail;
  }

  /**
   * The exception for a failed status. The native code calls this (with the last error's UTF-8
   * bytes, decoded here so a detail is never mangled by JNI's modified UTF-8), as does the Java
   * side for the arguments it refuses before reaching the library.
   */
  static LLMException of(int code, byte[] detail) {
    return of(code, Utf8.decode(detail));
  }

  static LLMException of(int code, String detail) {
    switch (Status.of(code)) {
      case INVALID_ARGUMENT:
        return new InvalidArgumentException(code, detail);
      case INVALID_UTF8:
        return new InvalidUtf8Exception(code, detail);
      case MODEL_NOT_FOUND:
        return new ModelNotFoundException(code, detail);
      case CONTEXT_OVERFLOW:
        return new ContextOverflowException(code, detail);
      case NOT_FOUND:
        return new NotFoundException(code, detail);
      case EXISTS:
        return new AlreadyExistsException(code, detail);
      case CANCELLED:
        return new CancelledException(code, detail);
      case BUSY:
        return new BusyException(code, detail);
      case UNAVAILABLE:
        return new UnavailableException(code, detail);
      case QUOTA_EXCEEDED:
        return new QuotaExceededException(code, detail);
      default:
        return new LLMException(code, detail);
    }
  }
}
