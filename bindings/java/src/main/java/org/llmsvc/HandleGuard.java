// SPDX-License-Identifier: Apache-2.0
package org.llmsvc;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.LongConsumer;

/**
 * The life of one native handle: any number of threads use it at once; it is closed once, after
 * every use in flight has ended, and any use after that is an {@link IllegalStateException}
 * rather than a freed pointer handed to C.
 */
final class HandleGuard {
  private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
  private final AtomicBoolean closing = new AtomicBoolean();
  private final String what;
  private long handle; // guarded by lock; 0 once closed

  HandleGuard(long handle, String what) {
    this.handle = handle;
    this.what = what;
  }

  /** Starts a use: the handle, valid until {@link #release()}. Throws once closing has begun. */
  long acquire() {
    lock.readLock().lock();
    if (closing.get() || handle == 0) {
      lock.readLock().unlock();
      throw new IllegalStateException(what + " is closed");
    }
    return handle;
  }

  void release() {
    lock.readLock().unlock();
  }

  boolean isOpen() {
    return !closing.get();
  }

  /**
   * Close from inside one of this handle's own uses would wait for itself forever: refuse it.
   * Called before the close is committed to (a Cleaner runs its action only once).
   */
  void checkNotInUseByThisThread() {
    if (lock.getReadHoldCount() > 0) {
      throw new IllegalStateException("cannot close " + what + " from inside one of its own calls"
          + " (return false from the listener to cancel the call)");
    }
  }

  /**
   * Ends the handle's life and returns it for the caller to free, or 0 if another close already
   * did. {@code interrupt} (may be null) runs first on the still-valid handle, so that uses in
   * flight end soon (a context cancels its running call); then this waits for them to end.
   */
  long close(LongConsumer interrupt) {
    checkNotInUseByThisThread();
    lock.readLock().lock();
    long h;
    try {
      if (!closing.compareAndSet(false, true)) return 0;
      h = handle;
      if (interrupt != null && h != 0) {
        try {
          interrupt.accept(h);
        } catch (RuntimeException e) {
          // Only hurries the close: without it the close waits for the uses to end on their own.
        }
      }
    } finally {
      lock.readLock().unlock();
    }
    lock.writeLock().lock();
    try {
      h = handle;
      handle = 0;
    } finally {
      lock.writeLock().unlock();
    }
    return h;
  }
}
