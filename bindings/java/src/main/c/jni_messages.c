// SPDX-License-Identifier: Apache-2.0
/*
 * jni_messages.c — org.llmsvc.Native's conversation methods (ABI 1.3): append, truncate and
 * messages, and the message arrays (jni_messages) that counting messages shares (jni_info.c).
 * Generating the reply is Native.call without a prompt (jni_call.c).
 *
 * The messages come back collected in C first, as the context list does (jni_context.c): the
 * library's callback never calls into Java, and one byte[] at a time is made afterwards, each
 * local reference dropped once stored.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "jni_support.h"
#include "org_llmsvc_Native.h"

int jni_messages(JNIEnv* env, jintArray roles, jobjectArray contents, jobjectArray tool_calls, llmsvc_message** out,
                 char*** buffers, size_t* count) {
  *out = NULL;
  *buffers = NULL;
  *count = 0;
  jsize n = (*env)->GetArrayLength(env, contents);
  if ((*env)->GetArrayLength(env, roles) != n || (tool_calls != NULL && (*env)->GetArrayLength(env, tool_calls) != n)) {
    jni_throw(env, "java/lang/IllegalArgumentException", "llmsvc_jni: as many roles and tool calls as contents");
    return -1;
  }
  size_t slots = n > 0 ? (size_t)n : 1;
  llmsvc_message* messages = calloc(slots, sizeof *messages);
  char** bufs = calloc(2 * slots, sizeof *bufs); /* [2i]: content i, [2i + 1]: its tool calls */
  jint* role_values = malloc(slots * sizeof *role_values);
  int rc = -1;
  if (messages == NULL || bufs == NULL || role_values == NULL) {
    jni_throw(env, "java/lang/OutOfMemoryError", "llmsvc_jni: no memory for the messages");
    goto done;
  }
  *out = messages;
  *buffers = bufs;
  *count = (size_t)n; /* every buffer slot is NULL or owned: jni_messages_free frees them all */
  (*env)->GetIntArrayRegion(env, roles, 0, n, role_values);
  if ((*env)->ExceptionCheck(env)) goto done;
  for (jsize i = 0; i < n; i++) {
    jbyteArray content = (jbyteArray)(*env)->GetObjectArrayElement(env, contents, i);
    if ((*env)->ExceptionCheck(env)) goto done;
    if (content == NULL) {
      jni_throw(env, "java/lang/NullPointerException", "llmsvc_jni: a message without content");
      goto done;
    }
    size_t len = 0;
    int copied = jni_buffer(env, content, &bufs[2 * i], &len);
    (*env)->DeleteLocalRef(env, content); /* one local reference per message would pile up */
    if (copied != 0) goto done;
    llmsvc_message_init(&messages[i]);
    messages[i].role = role_values[i];
    messages[i].content = len > 0 ? bufs[2 * i] : NULL;
    messages[i].content_len = len;
    jbyteArray calls = tool_calls != NULL ? (jbyteArray)(*env)->GetObjectArrayElement(env, tool_calls, i) : NULL;
    if ((*env)->ExceptionCheck(env)) goto done;
    if (calls != NULL) {
      size_t calls_len = 0;
      copied = jni_buffer(env, calls, &bufs[2 * i + 1], &calls_len);
      (*env)->DeleteLocalRef(env, calls);
      if (copied != 0) goto done;
      messages[i].tool_calls = calls_len > 0 ? bufs[2 * i + 1] : NULL;
      messages[i].tool_calls_len = calls_len;
    }
  }
  rc = 0;
done:
  if (*out == NULL) { /* not handed over */
    free(messages);
    free(bufs);
  }
  free(role_values);
  return rc;
}

void jni_messages_free(llmsvc_message* messages, char** buffers, size_t count) {
  if (buffers != NULL) {
    for (size_t i = 0; i < 2 * count; i++) free(buffers[i]);
  }
  free(buffers);
  free(messages);
}

JNIEXPORT void JNICALL Java_org_llmsvc_Native_contextAppend(JNIEnv* env, jclass cls, jlong context, jintArray roles,
                                                            jobjectArray contents, jobjectArray tool_calls) {
  (void)cls;
  llmsvc_message* messages = NULL;
  char** buffers = NULL;
  size_t count = 0;
  if (jni_messages(env, roles, contents, tool_calls, &messages, &buffers, &count) == 0) {
    llmsvc_status st = llmsvc_context_append(jni_context(context), messages, count);
    if (st != LLMSVC_OK) jni_throw_status(env, st);
  }
  jni_messages_free(messages, buffers, count);
}

JNIEXPORT void JNICALL Java_org_llmsvc_Native_contextTruncate(JNIEnv* env, jclass cls, jlong context,
                                                              jlong n_messages) {
  (void)cls;
  llmsvc_status st = llmsvc_context_truncate(jni_context(context), (size_t)n_messages);
  if (st != LLMSVC_OK) jni_throw_status(env, st);
}

/* The messages llmsvc_context_messages reports: their roles, and their contents and tool calls
 * packed one after another (ends[2i]: where message i's content ends in `bytes`, ends[2i + 1]
 * where its tool calls end; none: the two are equal). */
typedef struct message_list {
  jint* roles;
  size_t* ends;
  size_t count;
  size_t slots;
  char* bytes;
  size_t len;
  size_t cap;
  int out_of_memory;
} message_list;

static int collect_message(const llmsvc_message* m, void* user) {
  message_list* list = user;
  if (list->count == list->slots) {
    size_t slots = list->slots ? list->slots * 2 : 16;
    jint* roles = realloc(list->roles, slots * sizeof *roles);
    if (roles != NULL) list->roles = roles;
    size_t* ends = roles != NULL ? realloc(list->ends, 2 * slots * sizeof *ends) : NULL;
    if (ends == NULL) {
      list->out_of_memory = 1;
      return 1; /* stop early */
    }
    list->ends = ends;
    list->slots = slots;
  }
  /* A library before ABI 1.4 fills a shorter llmsvc_message: no tool calls. */
  const int has_calls = m->struct_size >= offsetof(llmsvc_message, tool_calls_len) + sizeof(size_t) &&
                        m->tool_calls != NULL && m->tool_calls_len > 0;
  const size_t calls_len = has_calls ? m->tool_calls_len : 0;
  if (list->len + m->content_len + calls_len > list->cap) {
    size_t cap = list->cap ? list->cap * 2 : 1024;
    while (cap < list->len + m->content_len + calls_len) cap *= 2;
    char* grown = realloc(list->bytes, cap);
    if (grown == NULL) {
      list->out_of_memory = 1;
      return 1;
    }
    list->bytes = grown;
    list->cap = cap;
  }
  if (m->content_len > 0) memcpy(list->bytes + list->len, m->content, m->content_len);
  list->len += m->content_len;
  list->ends[2 * list->count] = list->len;
  if (calls_len > 0) memcpy(list->bytes + list->len, m->tool_calls, calls_len);
  list->len += calls_len;
  list->ends[2 * list->count + 1] = list->len;
  list->roles[list->count] = m->role;
  list->count++;
  return 0;
}

/* {int[] roles, byte[][] contents, byte[][] tool calls (null entries for none)} of the list;
 * NULL with an exception pending on failure. */
static jobjectArray message_arrays(JNIEnv* env, const message_list* list) {
  if (list->count > (size_t)INT32_MAX) {
    jni_throw(env, "java/lang/OutOfMemoryError", "llmsvc_jni: more messages than a Java array holds");
    return NULL;
  }
  jsize n = (jsize)list->count;
  jintArray roles = (*env)->NewIntArray(env, n);
  if (roles == NULL) return NULL;
  if (n > 0) (*env)->SetIntArrayRegion(env, roles, 0, n, list->roles);
  jobjectArray contents = (*env)->NewObjectArray(env, n, llmsvc_jni.byte_array_class, NULL);
  jobjectArray calls = contents != NULL ? (*env)->NewObjectArray(env, n, llmsvc_jni.byte_array_class, NULL) : NULL;
  jobjectArray out = NULL;
  size_t start = 0;
  int failed = calls == NULL;
  for (jsize i = 0; i < n && !failed; i++) {
    jbyteArray bytes = jni_bytes(env, list->bytes + start, list->ends[2 * i] - start);
    failed = bytes == NULL;
    if (!failed) {
      (*env)->SetObjectArrayElement(env, contents, i, bytes);
      (*env)->DeleteLocalRef(env, bytes);
    }
    start = list->ends[2 * i];
    if (!failed && list->ends[2 * i + 1] > start) {
      bytes = jni_bytes(env, list->bytes + start, list->ends[2 * i + 1] - start);
      failed = bytes == NULL;
      if (!failed) {
        (*env)->SetObjectArrayElement(env, calls, i, bytes);
        (*env)->DeleteLocalRef(env, bytes);
      }
    }
    start = list->ends[2 * i + 1];
  }
  if (!failed) {
    jclass object_class = (*env)->FindClass(env, "java/lang/Object");
    out = object_class != NULL ? (*env)->NewObjectArray(env, 3, object_class, NULL) : NULL;
    if (object_class != NULL) (*env)->DeleteLocalRef(env, object_class);
    if (out != NULL) {
      (*env)->SetObjectArrayElement(env, out, 0, roles);
      (*env)->SetObjectArrayElement(env, out, 1, contents);
      (*env)->SetObjectArrayElement(env, out, 2, calls);
    }
  }
  (*env)->DeleteLocalRef(env, roles);
  if (contents != NULL) (*env)->DeleteLocalRef(env, contents);
  if (calls != NULL) (*env)->DeleteLocalRef(env, calls);
  return out;
}

JNIEXPORT jobjectArray JNICALL Java_org_llmsvc_Native_contextMessages(JNIEnv* env, jclass cls, jlong context,
                                                                      jlong first) {
  (void)cls;
  message_list list;
  memset(&list, 0, sizeof list);
  jobjectArray out = NULL;
  llmsvc_status st = llmsvc_context_messages(jni_context(context), (size_t)first, collect_message, &list);
  if (st != LLMSVC_OK) {
    jni_throw_status(env, st);
  } else if (list.out_of_memory) {
    jni_throw(env, "java/lang/OutOfMemoryError", "llmsvc_jni: no memory for the messages");
  } else {
    out = message_arrays(env, &list);
  }
  free(list.roles);
  free(list.ends);
  free(list.bytes);
  return out;
}
