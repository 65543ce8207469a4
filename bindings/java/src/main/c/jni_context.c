// SPDX-License-Identifier: Apache-2.0
/* jni_context.c — org.llmsvc.Native's context methods: new, open, fork, id, close, delete, info, list, cancel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jni_support.h"
#include "org_llmsvc_Native.h"

JNIEXPORT jlong JNICALL Java_org_llmsvc_Native_contextNew(JNIEnv* env, jclass cls, jlong service, jbyteArray id,
                                                          jbyteArray system_prompt, jboolean raw, jbyteArray tools,
                                                          jbyteArray adapter) {
  (void)cls;
  char* id_c = NULL;
  char* system_c = NULL;
  char* tools_c = NULL;
  char* adapter_c = NULL;
  jlong handle = 0;
  if (jni_cstring(env, id, &id_c) == 0 && jni_cstring(env, system_prompt, &system_c) == 0 &&
      jni_cstring(env, tools, &tools_c) == 0 && jni_cstring(env, adapter, &adapter_c) == 0) {
    llmsvc_context_options o;
    memset(&o, 0, sizeof o);
    llmsvc_context_options_init(&o);
    o.id = id_c;
    o.system_prompt = system_c;
    o.raw = raw ? 1 : 0;
    o.tools_json = tools_c;
    o.adapter = adapter_c; /* ABI 1.6 (checked on the Java side) */
    llmsvc_context* context = NULL;
    llmsvc_status st = llmsvc_context_new(jni_service(service), &o, &context);
    if (st != LLMSVC_OK) {
      jni_throw_status(env, st);
    } else {
      handle = jni_handle(context);
    }
  }
  free(id_c);
  free(system_c);
  free(tools_c);
  free(adapter_c);
  return handle;
}

JNIEXPORT jlong JNICALL Java_org_llmsvc_Native_contextOpen(JNIEnv* env, jclass cls, jlong service, jbyteArray id) {
  (void)cls;
  char* id_c = NULL;
  jlong handle = 0;
  if (jni_cstring(env, id, &id_c) == 0) {
    llmsvc_context* context = NULL;
    llmsvc_status st = llmsvc_context_open(jni_service(service), id_c, &context);
    if (st != LLMSVC_OK) {
      jni_throw_status(env, st);
    } else {
      handle = jni_handle(context);
    }
  }
  free(id_c);
  return handle;
}

JNIEXPORT jlong JNICALL Java_org_llmsvc_Native_contextFork(JNIEnv* env, jclass cls, jlong context, jbyteArray id) {
  (void)cls;
  char* id_c = NULL;
  jlong handle = 0;
  if (jni_cstring(env, id, &id_c) == 0) {
    llmsvc_context* fork = NULL;
    llmsvc_status st = llmsvc_context_fork(jni_context(context), id_c, &fork);
    if (st != LLMSVC_OK) {
      jni_throw_status(env, st);
    } else {
      handle = jni_handle(fork);
    }
  }
  free(id_c);
  return handle;
}

JNIEXPORT jbyteArray JNICALL Java_org_llmsvc_Native_contextId(JNIEnv* env, jclass cls, jlong context) {
  (void)cls;
  const char* id = llmsvc_context_id(jni_context(context));
  return jni_bytes(env, id, strlen(id));
}

JNIEXPORT void JNICALL Java_org_llmsvc_Native_contextClose(JNIEnv* env, jclass cls, jlong context) {
  (void)env;
  (void)cls;
  llmsvc_context_close(jni_context(context));
}

JNIEXPORT void JNICALL Java_org_llmsvc_Native_contextDelete(JNIEnv* env, jclass cls, jlong service, jbyteArray id) {
  (void)cls;
  char* id_c = NULL;
  if (jni_cstring(env, id, &id_c) != 0) return;
  llmsvc_status st = llmsvc_context_delete(jni_service(service), id_c);
  if (st != LLMSVC_OK) jni_throw_status(env, st);
  free(id_c);
}

JNIEXPORT void JNICALL Java_org_llmsvc_Native_contextInfo(JNIEnv* env, jclass cls, jlong service, jbyteArray id,
                                                          jintArray ints, jlongArray longs) {
  (void)cls;
  char* id_c = NULL;
  if (jni_cstring(env, id, &id_c) != 0) return;
  llmsvc_context_info info;
  memset(&info, 0, sizeof info);
  llmsvc_context_info_init(&info);
  llmsvc_status st = llmsvc_context_info_get(jni_service(service), id_c, &info);
  free(id_c);
  if (st != LLMSVC_OK) {
    jni_throw_status(env, st);
    return;
  }
  jint v[org_llmsvc_Native_INFO_INTS];
  v[org_llmsvc_Native_INFO_RAW] = info.raw;
  v[org_llmsvc_Native_INFO_TOKENS] = info.tokens;
  v[org_llmsvc_Native_INFO_TURNS] = info.turns;
  v[org_llmsvc_Native_INFO_CHUNKS_TOTAL] = info.chunks_total;
  v[org_llmsvc_Native_INFO_CHUNKS_RESIDENT] = info.chunks_resident;
  v[org_llmsvc_Native_INFO_CHUNKS_SWAPPED] = info.chunks_swapped;
  v[org_llmsvc_Native_INFO_CHUNKS_DROPPED] = info.chunks_dropped;
  v[org_llmsvc_Native_INFO_CHUNKS_F16] = info.chunks_f16;
  v[org_llmsvc_Native_INFO_CHUNKS_Q8] = info.chunks_q8;
  v[org_llmsvc_Native_INFO_CHUNKS_Q4] = info.chunks_q4;
  v[org_llmsvc_Native_INFO_CHUNKS_Q3] = info.chunks_q3;
  v[org_llmsvc_Native_INFO_CHUNKS_Q2] = info.chunks_q2;
  v[org_llmsvc_Native_INFO_CHUNKS_SHARED] = info.chunks_shared; /* 0 from a library before ABI 1.4 */
  (*env)->SetIntArrayRegion(env, ints, 0, org_llmsvc_Native_INFO_INTS, v);
  if ((*env)->ExceptionCheck(env)) return;
  jlong kv = (jlong)info.kv_resident_bytes;
  (*env)->SetLongArrayRegion(env, longs, org_llmsvc_Native_INFO_KV_RESIDENT_BYTES, 1, &kv);
}

/* The ids llmsvc_context_list reports, packed NUL-separated: collected in C, so the list's
 * callback never calls into Java. */
typedef struct id_list {
  char* bytes;
  size_t len;
  size_t cap;
  jsize count;
  int out_of_memory;
} id_list;

static int collect_id(const char* id, void* user) {
  id_list* list = user;
  size_t n = strlen(id) + 1;
  if (list->len + n > list->cap) {
    size_t cap = list->cap ? list->cap * 2 : 1024;
    while (cap < list->len + n) cap *= 2;
    char* grown = realloc(list->bytes, cap);
    if (grown == NULL) {
      list->out_of_memory = 1;
      return 1; /* stop early */
    }
    list->bytes = grown;
    list->cap = cap;
  }
  memcpy(list->bytes + list->len, id, n);
  list->len += n;
  list->count++;
  return 0;
}

/* The names a list function gives (llmsvc_context_list, llmsvc_adapter_list), as byte[][]. */
static jobjectArray name_list(JNIEnv* env, llmsvc_status (*list_fn)(llmsvc_service*, llmsvc_name_fn, void*),
                              jlong service, const char* what) {
  id_list list = {0};
  jobjectArray out = NULL;
  llmsvc_status st = list_fn(jni_service(service), collect_id, &list);
  if (st != LLMSVC_OK) {
    jni_throw_status(env, st);
  } else if (list.out_of_memory) {
    char msg[96];
    snprintf(msg, sizeof msg, "llmsvc_jni: no memory for the %s", what);
    jni_throw(env, "java/lang/OutOfMemoryError", msg);
  } else if ((out = (*env)->NewObjectArray(env, list.count, llmsvc_jni.byte_array_class, NULL)) != NULL) {
    const char* id = list.bytes;
    for (jsize i = 0; i < list.count; i++) {
      size_t n = strlen(id);
      jbyteArray bytes = jni_bytes(env, id, n);
      if (bytes == NULL) {
        (*env)->DeleteLocalRef(env, out);
        out = NULL;
        break;
      }
      (*env)->SetObjectArrayElement(env, out, i, bytes);
      (*env)->DeleteLocalRef(env, bytes); /* one local reference per name would pile up */
      id += n + 1;
    }
  }
  free(list.bytes);
  return out;
}

JNIEXPORT jobjectArray JNICALL Java_org_llmsvc_Native_contextList(JNIEnv* env, jclass cls, jlong service) {
  (void)cls;
  return name_list(env, llmsvc_context_list, service, "context list");
}

JNIEXPORT jobjectArray JNICALL Java_org_llmsvc_Native_adapterList(JNIEnv* env, jclass cls, jlong service) {
  (void)cls;
  return name_list(env, llmsvc_adapter_list, service, "adapter list");
}

JNIEXPORT void JNICALL Java_org_llmsvc_Native_contextCancel(JNIEnv* env, jclass cls, jlong context) {
  (void)cls;
  llmsvc_status st = llmsvc_context_cancel(jni_context(context));
  if (st != LLMSVC_OK) jni_throw_status(env, st);
}
