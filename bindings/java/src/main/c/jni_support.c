// SPDX-License-Identifier: Apache-2.0
/* jni_support.c — load-time lookups, exceptions, and byte[] <-> C copies (see jni_support.h). */
#include "jni_support.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

llmsvc_jni_globals llmsvc_jni;

/* A global reference to the class `name`, or NULL with an exception pending. */
static jclass global_class(JNIEnv* env, const char* name) {
  jclass local = (*env)->FindClass(env, name);
  if (local == NULL) return NULL;
  jclass global = (jclass)(*env)->NewGlobalRef(env, local);
  (*env)->DeleteLocalRef(env, local);
  if (global == NULL) jni_throw(env, "java/lang/OutOfMemoryError", "llmsvc_jni: no global reference");
  return global;
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void* reserved) {
  (void)reserved;
  JNIEnv* env = NULL;
  if ((*vm)->GetEnv(vm, (void**)&env, LLMSVC_JNI_VERSION) != JNI_OK) return JNI_ERR;
  /* The glue was compiled against one major version of the header; another major may have
   * changed the meaning of what it passes. */
  uint32_t abi = llmsvc_abi_version();
  if ((abi >> 16) != LLMSVC_ABI_VERSION_MAJOR) {
    char message[160];
    snprintf(message, sizeof message, "llmsvc_jni: libllmsvc has ABI %u.%u, this binding needs %d.x", abi >> 16,
             abi & 0xffffu, LLMSVC_ABI_VERSION_MAJOR);
    jni_throw(env, "java/lang/UnsatisfiedLinkError", message);
    return JNI_ERR;
  }
  llmsvc_jni.vm = vm;
  /* FindClass here uses the loader of the class that loaded this library (org.llmsvc.Native). */
  if ((llmsvc_jni.exception_class = global_class(env, "org/llmsvc/LLMException")) == NULL) return JNI_ERR;
  llmsvc_jni.exception_of =
      (*env)->GetStaticMethodID(env, llmsvc_jni.exception_class, "of", "(I[B)Lorg/llmsvc/LLMException;");
  if (llmsvc_jni.exception_of == NULL) return JNI_ERR;
  if ((llmsvc_jni.sink_class = global_class(env, "org/llmsvc/PieceSink")) == NULL) return JNI_ERR;
  llmsvc_jni.sink_piece = (*env)->GetMethodID(env, llmsvc_jni.sink_class, "piece", "([BI)Z");
  if (llmsvc_jni.sink_piece == NULL) return JNI_ERR;
  llmsvc_jni.sink_tokens = (*env)->GetMethodID(env, llmsvc_jni.sink_class, "tokens", "([B[I[F)Z");
  if (llmsvc_jni.sink_tokens == NULL) return JNI_ERR;
  if ((llmsvc_jni.byte_array_class = global_class(env, "[B")) == NULL) return JNI_ERR;
  return LLMSVC_JNI_VERSION;
}

JNIEXPORT void JNICALL JNI_OnUnload(JavaVM* vm, void* reserved) {
  (void)reserved;
  JNIEnv* env = NULL;
  if ((*vm)->GetEnv(vm, (void**)&env, LLMSVC_JNI_VERSION) != JNI_OK) return;
  (*env)->DeleteGlobalRef(env, llmsvc_jni.exception_class);
  (*env)->DeleteGlobalRef(env, llmsvc_jni.sink_class);
  (*env)->DeleteGlobalRef(env, llmsvc_jni.byte_array_class);
  memset(&llmsvc_jni, 0, sizeof llmsvc_jni);
}

void jni_throw(JNIEnv* env, const char* class_name, const char* message) {
  jclass cls = (*env)->FindClass(env, class_name);
  if (cls == NULL) return; /* NoClassDefFoundError is pending instead */
  (*env)->ThrowNew(env, cls, message);
  (*env)->DeleteLocalRef(env, cls);
}

void jni_throw_status(JNIEnv* env, llmsvc_status status) {
  /* Taken first: every later llmsvc_ call on this thread would clear it. */
  jni_throw_status_detail(env, status, llmsvc_last_error());
}

void jni_throw_status_detail(JNIEnv* env, llmsvc_status status, const char* detail) {
  jbyteArray bytes = jni_bytes(env, detail, strlen(detail));
  if (bytes == NULL) return;
  jobject exception =
      (*env)->CallStaticObjectMethod(env, llmsvc_jni.exception_class, llmsvc_jni.exception_of, (jint)status, bytes);
  if ((*env)->ExceptionCheck(env)) { /* building it failed: that exception is the one to see */
    (*env)->DeleteLocalRef(env, bytes);
    return;
  }
  (*env)->DeleteLocalRef(env, bytes);
  if (exception == NULL) { /* LLMException.of never returns null; never throw nothing either */
    jni_throw(env, "java/lang/IllegalStateException", llmsvc_status_name(status));
    return;
  }
  (*env)->Throw(env, (jthrowable)exception);
  (*env)->DeleteLocalRef(env, exception);
}

int jni_buffer(JNIEnv* env, jbyteArray array, char** out, size_t* len) {
  jsize n = (*env)->GetArrayLength(env, array);
  char* copy = malloc((size_t)n + 1);
  if (copy == NULL) {
    jni_throw(env, "java/lang/OutOfMemoryError", "llmsvc_jni: no memory for a string argument");
    return -1;
  }
  (*env)->GetByteArrayRegion(env, array, 0, n, (jbyte*)copy);
  copy[n] = '\0';
  *out = copy;
  *len = (size_t)n;
  return 0;
}

int jni_cstring(JNIEnv* env, jbyteArray array, char** out) {
  size_t len = 0;
  *out = NULL;
  return array == NULL ? 0 : jni_buffer(env, array, out, &len);
}

jbyteArray jni_bytes(JNIEnv* env, const char* data, size_t len) {
  if (len > (size_t)INT32_MAX) {
    jni_throw(env, "java/lang/OutOfMemoryError", "llmsvc_jni: a string longer than a Java array");
    return NULL;
  }
  jbyteArray array = (*env)->NewByteArray(env, (jsize)len);
  if (array == NULL) return NULL; /* OutOfMemoryError pending */
  (*env)->SetByteArrayRegion(env, array, 0, (jsize)len, (const jbyte*)data);
  return array;
}
