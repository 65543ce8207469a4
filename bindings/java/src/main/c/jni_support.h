// SPDX-License-Identifier: Apache-2.0
/*
 * jni_support.h — what the binding's native methods share: the Java classes and methods looked
 * up once at load, turning a failed llmsvc status into the Java exception for it, copying byte[]
 * (standard UTF-8 made on the Java side) to C strings and back, and handles as jlong.
 */
#ifndef LLMSVC_JNI_SUPPORT_H
#define LLMSVC_JNI_SUPPORT_H

#include <jni.h>
#include <stddef.h>
#include <stdint.h>

#include <llmsvc/llmsvc.h>

/* The JNI version the binding asks for (Java 8's: everything it uses). */
#define LLMSVC_JNI_VERSION JNI_VERSION_1_8

/* Set once by JNI_OnLoad; read-only afterwards. */
typedef struct llmsvc_jni_globals {
  JavaVM* vm;
  jclass exception_class;   /* org.llmsvc.LLMException */
  jmethodID exception_of;   /* static LLMException of(int, byte[]) */
  jclass sink_class;        /* org.llmsvc.PieceSink */
  jmethodID sink_piece;     /* boolean piece(byte[], int) */
  jmethodID sink_tokens;    /* boolean tokens(byte[], int[], float[]) */
  jclass byte_array_class;  /* byte[] */
} llmsvc_jni_globals;

extern llmsvc_jni_globals llmsvc_jni;

/* Throws the LLMException subclass for `status`, with the calling thread's llmsvc_last_error()
 * as its detail. Call it right after the failing llmsvc_ function: the next one clears the
 * detail. Leaves an exception pending in every case (OutOfMemoryError if it cannot build one). */
void jni_throw_status(JNIEnv* env, llmsvc_status status);

/* Throws the LLMException subclass for `status` with a detail of the binding's own. */
void jni_throw_status_detail(JNIEnv* env, llmsvc_status status, const char* detail);

/* Throws a plain Java exception of class `class_name` (e.g. "java/lang/IllegalStateException"). */
void jni_throw(JNIEnv* env, const char* class_name, const char* message);

/* Copies `array` to a new NUL-terminated C string in *out (NULL when `array` is null): the
 * caller frees it. Returns 0, or -1 with OutOfMemoryError pending. */
int jni_cstring(JNIEnv* env, jbyteArray array, char** out);

/* Copies `array` (non-null) to a new buffer in *out, its length in *len: the caller frees it.
 * Returns 0, or -1 with an exception pending. */
int jni_buffer(JNIEnv* env, jbyteArray array, char** out, size_t* len);

/* A new byte[] holding `len` bytes of `data`; NULL with an exception pending on failure. */
jbyteArray jni_bytes(JNIEnv* env, const char* data, size_t len);

/* The messages of Java's parallel arrays (role codes, UTF-8 contents, and UTF-8 tool calls with
 * null entries for none, or no tool_calls array at all; same length) as llmsvc_message[*count]
 * in *out, their texts copied into *buffers (two per message). Returns 0, or -1 with an
 * exception pending. Either way free with jni_messages_free(*out, *buffers, *count). */
int jni_messages(JNIEnv* env, jintArray roles, jobjectArray contents, jobjectArray tool_calls, llmsvc_message** out,
                 char*** buffers,
                 size_t* count);
void jni_messages_free(llmsvc_message* messages, char** buffers, size_t count);

/* Handles travel through Java as the pointer's bits in a long. */
static inline jlong jni_handle(const void* p) { return (jlong)(intptr_t)p; }
static inline llmsvc_service* jni_service(jlong h) { return (llmsvc_service*)(intptr_t)h; }
static inline llmsvc_context* jni_context(jlong h) { return (llmsvc_context*)(intptr_t)h; }

#endif /* LLMSVC_JNI_SUPPORT_H */
